"""Per-item seeds that do not depend on iteration order.

``seed_for(base_seed, item_id, name)`` hashes the three parts with SHA-256 and returns the
first 8 bytes as an unsigned integer. The same (base seed, item, perturbation) always gets the
same seed, whatever else is in the plan and in whichever order items are processed.
"""

from __future__ import annotations

import hashlib

SEED_SEPARATOR = "\x1f"


def seed_for(base_seed: int, item_id: str, name: str) -> int:
    """Seed for one item and one named random operation (e.g. ``"typo"``, ``"fewshot"``)."""
    if not isinstance(base_seed, int) or isinstance(base_seed, bool):
        raise ValueError(f"base_seed must be an int, got {base_seed!r}")
    if not isinstance(name, str) or not name:
        raise ValueError(f"seed_for needs a non-empty operation name, got {name!r}")
    payload = SEED_SEPARATOR.join((str(base_seed), str(item_id), name)).encode("utf-8")
    return int.from_bytes(hashlib.sha256(payload).digest()[:8], "big")


# the rule, as plan.json records it ("sampling_seeds")
REQUEST_SEED_RULE = ("sampled requests (temperature > 0): seed = sha256(f'{base}\\x1f{item id}\\x1frequest:<purpose>')"
                     "[:8] big-endian mod 2^63, base = the protocol's seed else the model seed, purpose = answer | "
                     "self_consistency | verbal | nota | more_info | self_ref; greedy requests: the model seed")


def request_seed(base_seed: int, item_id: str, purpose: str) -> int:
    """Seed of one sampled request: ``seed_for(base_seed, item_id, "request:" + purpose)`` cut to
    63 bits (engines and APIs take a signed 64-bit seed). ``purpose`` names what the request is
    for (``"answer"``, ``"self_consistency"``, ``"verbal"``, ...), so two sampled requests of one
    item never share a random stream (a self-consistency sample is not a copy of the scored
    answer) and no two items share one (their draws are independent)."""
    return seed_for(base_seed, item_id, "request:" + purpose) & ((1 << 63) - 1)
