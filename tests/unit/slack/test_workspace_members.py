"""Who counts as a user of a Slack workspace (Slack Connect, Enterprise Grid)."""

from __future__ import annotations

from adapters.slack.platform import belongs_to


def test_a_user_belongs_to_their_home_workspace_only():
    """A Slack Connect user from another organisation (another `team_id`) is not a user of this workspace."""
    assert belongs_to({"team_id": "T1"}, "T1")
    assert not belongs_to({"team_id": "T9"}, "T1")
    assert not belongs_to({}, "T1")  # no home workspace named: not this one


def test_an_enterprise_grid_user_belongs_to_the_workspaces_of_their_organisation_they_are_in():
    """In a Grid organisation, `enterprise_user.teams` lists the workspaces the user is in."""
    grid = {"team_id": "E1", "enterprise_user": {"enterprise_id": "E1", "teams": ["T1", "T2"]}}
    assert belongs_to(grid, "T1") and belongs_to(grid, "T2")
    assert not belongs_to(grid, "T3")
    assert not belongs_to({"team_id": "T9", "enterprise_user": {"teams": "T1"}}, "T1")  # not a list: ignored
