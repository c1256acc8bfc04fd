"""A complete bring-your-own example: a batched torch env (:mod:`.env`), a network of one's own
(:mod:`.network`) and the config that trains them (``config.yaml``); see docs/byo_env.md."""
