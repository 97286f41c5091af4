"""An RL-style client of `kernelgate serve`: variants of a candidate, one batch per step, rewards and feedback.

A toy policy stands in for a model: each step it takes the best candidate so
far, makes ``--variants`` variants of it by changing its integer tuning
constants (``BLOCK = 4096``, ``NUM_WARPS = 8``: each scaled by a power of
two) and submits them as one batch; it reads back every variant's reward and
the feedback text a multi-turn generator would get, and keeps the best::

    kernelgate serve --results runs/svc --no-auth --device cpu --yes-execute &     # or a GPU host with --tokens
    python examples/rl_client.py --url http://127.0.0.1:8321 --problem gelu --steps 2 --variants 6

``--token`` (or ``$KG_TOKEN``) is the client's token when the service has a
tokens file. ``--reward '{"speed": "e_lib"}'`` changes the reward mapping for
this client's reads (harness/score/reward.py). Identical variants are
answered from the service's store (``deduplicated``), so re-running the
script costs nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.serve.client import ServiceClient  # noqa: E402

CONSTANT = re.compile(r"^(?P<name>[A-Z][A-Z0-9_]*)\s*=\s*(?P<value>\d+)\s*$", re.M)


def variants(source: str, n: int, rng: random.Random) -> list[str]:
    """Up to ``n`` distinct variants: each module-level power-of-two integer constant scaled by 1/4..4."""
    consts = [(m.group("name"), int(m.group("value"))) for m in CONSTANT.finditer(source)
              if int(m.group("value")) > 0 and int(m.group("value")) & (int(m.group("value")) - 1) == 0]
    out, seen = [], {source}
    for _ in range(20 * n):
        if len(out) == n:
            break
        text = source
        for name, value in consts:
            new = max(1, int(value * rng.choice((0.25, 0.5, 1, 2, 4))))
            text = re.sub(rf"^{name}\s*=\s*\d+\s*$", f"{name} = {new}", text, count=1, flags=re.M)
        if text not in seen:
            seen.add(text)
            out.append(text)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[1:]))
    ap.add_argument("--url", default="http://127.0.0.1:8321")
    ap.add_argument("--token", default=os.environ.get("KG_TOKEN"))
    ap.add_argument("--problem", default="gelu")
    ap.add_argument("--source", help="the starting candidate (default: submissions/triton-reference/PROBLEM.py)")
    ap.add_argument("--steps", type=int, default=1)
    ap.add_argument("--variants", type=int, default=8)
    ap.add_argument("--preset", default="quick")
    ap.add_argument("--reward", type=json.loads, default=None, help="reward config (JSON), e.g. '{\"speed\": \"e_lib\"}'")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds to wait for one step's results")
    args = ap.parse_args(argv)
    best = Path(args.source or ROOT / "submissions" / "triton-reference" / f"{args.problem}.py").read_text()
    best_reward = None
    rng = random.Random(args.seed)
    with ServiceClient(args.url, args.token) as kg:
        for step in range(args.steps):
            batch = [best] + variants(best, args.variants, rng)
            t0 = time.monotonic()
            ids = kg.submit_batch([{"source": s} for s in batch], problem=args.problem, preset=args.preset,
                                  generator="rl-client", generator_version=f"step-{step}")
            views = kg.wait(ids, timeout_s=args.timeout, include=("reward", "feedback"), reward=args.reward)
            took = time.monotonic() - t0
            rewards = [v["reward"]["value"] for v in views]
            print(f"step {step}: {len(batch)} candidates in {took:.1f} s "
                  f"(queue throttled {kg.throttled} time(s)); rewards:")
            for k, (v, r) in enumerate(zip(views, rewards)):
                tag = "current best" if k == 0 else f"variant {k}"
                print(f"  {tag:>12}  {v['task_id']}  {' '.join(v['statuses'].values()):<20} "
                      f"reward {'-' if r is None else format(r, '.3f')}")
            scored = [(r, k) for k, r in enumerate(rewards) if r is not None]
            if scored:
                r, k = max(scored)
                if best_reward is None or r > best_reward:
                    best, best_reward = batch[k], r
                worst = min(scored)[1]
                print("feedback of the lowest-reward candidate (what a multi-turn generator would be shown next):\n")
                print(views[worst]["feedback"])
    print(f"best reward: {best_reward}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
