-- The arguments a trust grant made on a card binds, fixed when the card opens like its offer
-- (docs/decisions/0034-arguments-approvers-can-see.md): the card names the arguments such a grant
-- leaves free, and a grant binds at least what its card said. '{}': every argument; NULL: no offer,
-- or a card opened before cards said so (a grant then binds what the setting names when clicked).
-- depends: 0013.prune-every-runs

ALTER TABLE approvals ADD COLUMN trust_offer_matching text[];
