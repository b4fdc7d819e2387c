"""Build the Docker image and prove it runs: `scripts/prove-image` (docs/operations.md, "The Docker image").

Run it whenever the Dockerfile or the dependencies change. It needs podman (Docker's registries
are not needed: see `--stand-in-base`) and this repository's dev dependencies, because the
platforms the container talks to are the test stand-ins (Slack's Web API, Gemini, an HTTP
target), started on this machine's loopback; the container shares the host's network.

What it checks, each as one line that passes or fails:

1. the image builds (`podman build --pull=never --format docker`: the OCI format drops the
   HEALTHCHECK);
2. what ships: the runtime user is uid 10001, only the venv is under /app (no tests/, bench/,
   docs/, .ci/, no uv cache anywhere), and nothing under /app is writable by that user;
3. a container answers `GET /healthz` and `GET /readyz` with 200, and `podman healthcheck run`
   passes;
4. it works: a mention gets a card, Approve runs the tool once and the answer is posted, an admin
   command changes the configuration;
5. SIGTERM (`podman stop`) stops it within its grace period with exit status 0;
6. `/data` survives a restart of the container and its replacement by a new one (the
   configuration changed in 4 is still there);
7. a `/data` the runtime user cannot write stops it at once with one line naming the directory
   and uid 10001.

`--stand-in-base` first builds a stand-in for `python:3.11-slim` (Debian bookworm's own Python
3.11, with debootstrap; needs root) when that image is not present and cannot be pulled, as
docs/decisions/0016 describes. Exit status: 0 when every check passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx

from tests.e2e.agent_script import agent_script
from tests.standins.gemini import GeminiStandIn
from tests.standins.slack_api import SlackApiStandIn
from tests.standins.slack_events import SlackEventSender
from tests.support.http_target import HttpTarget

ROOT = Path(__file__).resolve().parents[1]
IMAGE = "localhost/countersign:proof"
BASE = "docker.io/library/python:3.11-slim"
CONTAINER = "countersign-proof"
VOLUME = "countersign-proof-data"
RUNTIME_UID = 10001
BOT_TOKEN = "xoxb-proof"  # noqa: S105 - the stand-in's token
SIGNING_SECRET = "proof-signing-secret"  # noqa: S105
GEMINI_KEY = "proof-gemini-key"
TEAM, ALICE, CAROL, CHANNEL = "T1", "UALICE", "UCAROL", "C1"
WAIT_S = 120.0
"""Seconds to wait for the container at most (the first start runs initdb)."""
STOP_GRACE_S = 30
"""`podman stop -t`: seconds before podman sends SIGKILL."""

CONTAINERS_CONF = """\
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
[engine]
runtime = "runc"
"""
"""Used when CONTAINERS_CONF is unset: crun fails on some VMs' cgroup v2 setup, and podman's
default nofile limit (1048576) is refused by some kernels (docker-proof.md)."""

SHIPPED_CHECK = f"""
import glob, os
problems = []
if os.getuid() != {RUNTIME_UID}:
    problems.append(f"runs as uid {{os.getuid()}}, not {RUNTIME_UID}")
if sorted(os.listdir("/app")) != [".venv"]:
    problems.append(f"/app holds {{sorted(os.listdir('/app'))}}, not only .venv")
roots = ("/root", "/home", "/data", "/app", "/tmp")
caches = [c for base in roots for c in glob.glob(base + "/**/.cache", recursive=True)]
if caches:
    problems.append(f"caches are in the image: {{caches[:3]}}")
for name in ("tests", "bench", "docs", ".ci", "scripts"):
    found = glob.glob("/app/" + name) + glob.glob("/app/.venv/lib/python*/site-packages/" + name)
    if found:
        problems.append(f"{{found[0]}} is in the image")
writable = []
for here, dirs, files in os.walk("/app"):
    for entry in [here, *(os.path.join(here, f) for f in files)]:
        if os.access(entry, os.W_OK, follow_symlinks=False) and not os.path.islink(entry):
            writable.append(entry)
if writable:
    problems.append(f"{{len(writable)}} paths under /app are writable, e.g. {{writable[:3]}}")
print("\\n".join(problems) or "ok")
"""


class Proof:
    """Runs the checks in order, printing one line each; stops at the first failure."""

    def __init__(self, podman: str) -> None:
        self.podman = podman
        self.failed = False

    def check(self, what: str, ok: bool, detail: str = "") -> bool:
        """Print `ok` or `FAIL` for `what`; remember a failure."""
        print(f"{'ok  ' if ok else 'FAIL'} {what}{f': {detail}' if detail else ''}", flush=True)
        self.failed |= not ok
        return ok

    def run(self, *args: str, check: bool = False, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        """`podman <args>`, its output captured."""
        return subprocess.run(  # noqa: S603 - our own podman command line
            [self.podman, *args], capture_output=True, text=True, check=check, timeout=timeout
        )


def _failure(result: subprocess.CompletedProcess[str]) -> str:
    """What a failed podman command printed (nothing for a success: podman's warnings are noise)."""
    return result.stderr.strip()[-1000:] if result.returncode else ""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _ensure_base(proof: Proof, stand_in: bool, mirror: str | None) -> bool:
    """Make `python:3.11-slim` available: present, pulled, or (with `stand_in`) built."""
    if proof.run("image", "exists", BASE).returncode == 0:
        return True
    if proof.run("pull", BASE, timeout=120).returncode == 0:
        return True
    if not stand_in:
        return proof.check(
            f"base image {BASE}",
            False,
            "not present and cannot be pulled; pass --stand-in-base to build a stand-in with debootstrap",
        )
    return proof.check("stand-in base image (debootstrap)", _build_stand_in_base(proof, mirror))


def _build_stand_in_base(proof: Proof, mirror: str | None) -> bool:
    """Debian bookworm's Python 3.11 with pip and the machine's CA certificates, as python:3.11-slim."""
    if os.geteuid() != 0 or shutil.which("debootstrap") is None:
        print("     building the stand-in base needs root and debootstrap (apt-get install debootstrap)")
        return False
    rootfs = Path(tempfile.mkdtemp(prefix="countersign-rootfs-"))
    try:
        subprocess.run(  # noqa: S603 - a fixed command line
            [  # noqa: S607 - debootstrap from PATH
                "debootstrap",
                "--variant=minbase",
                "--include=python3,python3-venv,python3-pip,ca-certificates",
                "bookworm",
                str(rootfs),
                mirror or "http://deb.debian.org/debian",
            ],
            check=True,
            capture_output=True,
        )
        (rootfs / "usr/lib/python3.11/EXTERNALLY-MANAGED").unlink(missing_ok=True)
        for name, target in (("python", "/usr/bin/python3"), ("python3", "/usr/bin/python3"), ("pip", "/usr/bin/pip3")):
            link = rootfs / "usr/local/bin" / name
            link.unlink(missing_ok=True)
            link.symlink_to(target)
        for cert in Path("/usr/local/share/ca-certificates").glob("*.crt"):
            shutil.copy(cert, rootfs / "usr/local/share/ca-certificates" / cert.name)
        chroot = ["chroot", str(rootfs), "update-ca-certificates"]
        subprocess.run(chroot, check=True, capture_output=True)  # noqa: S603 - a fixed command line
        tar = subprocess.Popen(  # noqa: S603
            ["tar", "--numeric-owner", "-C", str(rootfs), "-c", "."],  # noqa: S607
            stdout=subprocess.PIPE,
        )
        imported = subprocess.run(  # noqa: S603
            [
                proof.podman,
                "import",
                "--change",
                "ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin",
                "--change",
                "ENV LANG=C.UTF-8",
                "--change",
                "ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
                "--change",
                'CMD ["python3"]',
                "-",
                BASE,
            ],
            stdin=tar.stdout,
            capture_output=True,
        )
        tar.wait()
        return imported.returncode == 0 and tar.returncode == 0
    except subprocess.CalledProcessError as exc:
        print(f"     {exc.cmd[0]} failed: {(exc.stderr or b'').decode()[-500:]}")
        return False
    finally:
        shutil.rmtree(rootfs, ignore_errors=True)


def _container_args(port: int, gemini: GeminiStandIn, slack: SlackApiStandIn, target: HttpTarget) -> list[str]:
    env = {
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "GOOGLE_API_KEY": GEMINI_KEY,
        "GEMINI_BASE_URL": gemini.base_url,
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_SIGNING_SECRET": SIGNING_SECRET,
        "SLACK_API_URL": slack.base_url,
        "HTTP_REQUEST_ALLOWED_HOSTS": target.host,
        "SHUTDOWN_GRACE_S": "10",
    }
    flags = [f"--env={key}={value}" for key, value in env.items()]
    return ["--network=host", f"--volume={VOLUME}:/data", *flags]


async def _wait_http_200(url: str, within_s: float = WAIT_S) -> tuple[bool, str]:
    deadline = time.monotonic() + within_s
    last = "no answer"
    async with httpx.AsyncClient(timeout=3) as client:
        while time.monotonic() < deadline:
            try:
                response = await client.get(url)
            except httpx.HTTPError as exc:
                last = type(exc).__name__
            else:
                last = f"{response.status_code} {response.text[:200]}"
                if response.status_code == 200:
                    return True, last
            await asyncio.sleep(0.5)
    return False, last


def _state(proof: Proof) -> tuple[str, int]:
    out = proof.run("inspect", CONTAINER, "--format", "{{.State.Status}} {{.State.ExitCode}}").stdout.split()
    return (out[0], int(out[1])) if len(out) == 2 else ("missing", -1)


async def _command(events: SlackEventSender, slack: SlackApiStandIn, text: str) -> str:
    """`/countersign <text>` by the admin; the private reply."""
    url = slack.new_response_url(CHANNEL, user=CAROL)
    before = len(slack.calls_to("response_url"))
    await events.slash_command("/countersign", text, CAROL, CHANNEL, url)
    calls = await slack.wait_for("response_url", count=before + 1, timeout=WAIT_S)
    return str(calls[-1].args.get("text", ""))


async def _started(proof: Proof, port: int, what: str) -> bool:
    healthy, detail = await _wait_http_200(f"http://127.0.0.1:{port}/healthz")
    if not proof.check(f"{what}: GET /healthz answers 200", healthy, detail):
        print(proof.run("logs", CONTAINER).stderr[-3000:])
        return False
    ready, detail = await _wait_http_200(f"http://127.0.0.1:{port}/readyz", within_s=30)
    return proof.check(f"{what}: GET /readyz answers 200", ready, detail)


async def _prove_running(
    proof: Proof, port: int, gemini: GeminiStandIn, slack: SlackApiStandIn, target: HttpTarget
) -> None:
    base = _container_args(port, gemini, slack, target)
    proof.run("volume", "rm", "--force", VOLUME)
    started = proof.run("run", "--detach", f"--name={CONTAINER}", *base, IMAGE)
    if not proof.check("the container starts", started.returncode == 0, _failure(started)):
        return
    if not await _started(proof, port, "first start"):
        return
    health = proof.run("healthcheck", "run", CONTAINER, timeout=60)
    proof.check(
        "podman healthcheck run passes (the image's HEALTHCHECK)", health.returncode == 0, health.stderr.strip()
    )

    async with SlackEventSender(f"http://127.0.0.1:{port}/slack/events", SIGNING_SECRET, team_id=TEAM) as events:
        mention = await events.app_mention(CHANNEL, ALICE, "<@UBOT> post widget")
        posts = await slack.wait_for(
            "chat.postMessage", lambda a: bool(a.get("blocks")) and "actions" in str(a["blocks"]), timeout=WAIT_S
        )
        card = slack.message(CHANNEL, str(posts[0].response["ts"]))
        approve = next(b for b in card["blocks"] if b["type"] == "actions")["elements"][0]
        await events.block_actions(
            ALICE,
            CHANNEL,
            card["ts"],
            approve["action_id"],
            approve["value"],
            slack.new_trigger_id(),
            thread_ts=mention.ts,
        )
        answers = await slack.wait_for(
            "chat.postMessage", lambda a: str(a.get("text", "")).startswith("Result: "), timeout=WAIT_S
        )
        proof.check(
            "a mention gets a card; Approve runs the tool once and the answer is posted",
            len(target.requests) == 1 and (target.requests[0].json or {}).get("name") == "widget" and len(answers) == 1,
            f"target saw {len(target.requests)} request(s)",
        )
        changed = await _command(events, slack, "quorum http_request 2")
        proof.check("an admin command changes the configuration", "2" in changed, changed[:200])

        began = time.monotonic()
        stopped = proof.run("stop", "--time", str(STOP_GRACE_S), CONTAINER, timeout=STOP_GRACE_S + 30)
        took = time.monotonic() - began
        status, code = _state(proof)
        logs = proof.run("logs", CONTAINER).stderr
        proof.check(
            "SIGTERM stops it within the grace period, exit status 0, no traceback",
            stopped.returncode == 0
            and status == "exited"
            and code == 0
            and took < STOP_GRACE_S
            and "Traceback" not in logs,
            f"{took:.1f} s, status {status}, exit {code}",
        )

        restarted = proof.run("start", CONTAINER)
        ok = proof.check("the stopped container starts again", restarted.returncode == 0, _failure(restarted))
        if ok and await _started(proof, port, "restart"):
            await _still_configured(proof, events, slack, "the restart")
        proof.run("stop", "--time", str(STOP_GRACE_S), CONTAINER, timeout=STOP_GRACE_S + 30)
        proof.run("rm", "--force", CONTAINER)

        replaced = proof.run("run", "--detach", f"--name={CONTAINER}", *base, IMAGE)
        ok = proof.check("a new container on the same volume starts", replaced.returncode == 0, _failure(replaced))
        if ok and await _started(proof, port, "replacement"):
            await _still_configured(proof, events, slack, "the replacement")
        proof.run("stop", "--time", str(STOP_GRACE_S), CONTAINER, timeout=STOP_GRACE_S + 30)


async def _still_configured(proof: Proof, events: SlackEventSender, slack: SlackApiStandIn, after: str) -> None:
    shown = await _command(events, slack, "show")
    kept = "· quorum 2" in shown
    proof.check(f"/data survived {after} (quorum 2 is still set)", kept, "" if kept else shown[:300])


def _prove_unwritable_data(proof: Proof) -> None:
    """A bind mount owned by root (mode 755) on /data: one line naming it and the uid, exit 2."""
    with tempfile.TemporaryDirectory(prefix="countersign-rootonly-") as directory:
        os.chmod(directory, 0o755)  # noqa: S103 - readable, not writable by others: the point
        result = proof.run(
            "run",
            "--rm",
            f"--volume={directory}:/data",
            "--env=GOOGLE_API_KEY=x",
            IMAGE,
            "/app/.venv/bin/countersign",
            "migrate",
            timeout=120,
        )
        last = (result.stderr.strip().splitlines() or [""])[-1]
        proof.check(
            "a /data the runtime user cannot write: exit 2, one line naming it and the uid",
            result.returncode == 2
            and "/data" in last
            and f"uid {RUNTIME_UID}" in last
            and "Traceback" not in result.stderr,
            last,
        )


@contextlib.asynccontextmanager
async def _stand_ins() -> AsyncIterator[tuple[GeminiStandIn, SlackApiStandIn, HttpTarget]]:
    async with (
        HttpTarget() as target,
        GeminiStandIn(agent_script(target.url()), api_key=GEMINI_KEY) as gemini,
        SlackApiStandIn(bot_token=BOT_TOKEN, team_id=TEAM) as slack,
    ):
        slack.add_user(ALICE, "alice")
        slack.add_user(CAROL, "carol", is_admin=True)
        yield gemini, slack, target


async def _prove(args: argparse.Namespace) -> int:
    podman = shutil.which("podman")
    if podman is None:
        print("podman is not installed (apt-get install podman runc)", file=sys.stderr)
        return 1
    os.environ.setdefault("CONTAINERS_CONF", _write_containers_conf())
    proof = Proof(podman)
    if not _ensure_base(proof, args.stand_in_base, args.mirror):
        return 1
    began = time.monotonic()
    dockerfile = str(args.dockerfile or ROOT / "Dockerfile")
    built = proof.run(
        "build", "--pull=never", "--format=docker", f"--file={dockerfile}", "-t", IMAGE, str(ROOT), timeout=1800
    )
    if not proof.check(
        f"the image builds ({time.monotonic() - began:.0f} s)",
        built.returncode == 0,
        built.stderr[-2000:] if built.returncode else "",
    ):
        return 1
    size = proof.run("image", "inspect", IMAGE, "--format", "{{.Size}}").stdout.strip()
    base_size = proof.run("image", "inspect", BASE, "--format", "{{.Size}}").stdout.strip()
    print(f"     image {int(size) / 1e6:.0f} MB, of which the base {int(base_size) / 1e6:.0f} MB")
    user = proof.run("image", "inspect", IMAGE, "--format", "{{.Config.User}}").stdout.strip()
    proof.check(f"the image's user is {RUNTIME_UID}", user == str(RUNTIME_UID), user)
    shipped = proof.run("run", "--rm", "--entrypoint=python", IMAGE, "-c", SHIPPED_CHECK, timeout=120)
    proof.check(
        "only the venv ships, read-only to the runtime user",
        shipped.stdout.strip() == "ok",
        (shipped.stdout + shipped.stderr).strip()[-500:],
    )
    try:
        async with _stand_ins() as (gemini, slack, target):
            await _prove_running(proof, _free_port(), gemini, slack, target)
    finally:
        proof.run("rm", "--force", CONTAINER)
        proof.run("volume", "rm", "--force", VOLUME)
    _prove_unwritable_data(proof)
    print("the image is proven" if not proof.failed else "the image is NOT proven", flush=True)
    return 1 if proof.failed else 0


def _write_containers_conf() -> str:
    path = Path(tempfile.gettempdir()) / "countersign-proof-containers.conf"
    path.write_text(CONTAINERS_CONF)
    return str(path)


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments and run the proof; the exit status."""
    parser = argparse.ArgumentParser(prog="scripts/prove-image", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--stand-in-base",
        action="store_true",
        help=f"build a stand-in for {BASE} with debootstrap when it is absent and cannot be pulled (root)",
    )
    parser.add_argument("--dockerfile", type=Path, help="another Dockerfile to prove (default: the repository's)")
    parser.add_argument("--mirror", help="the Debian mirror for --stand-in-base (default: deb.debian.org)")
    return asyncio.run(_prove(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
