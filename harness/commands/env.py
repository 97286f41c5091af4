"""``kernelgate env``: this machine, the versions in use, and what can run here."""

from __future__ import annotations

import argparse

from harness.jsonio import dumps

EPILOG = """\
Every result record carries this snapshot (env), so a leaderboard can tell comparable runs apart. On a
machine without a GPU the CPU path is used: Triton kernels run in the interpreter, TileLang kernels are
only lowered to CUDA source (status LOWERED); those records are judged on correctness only.

examples:
  kernelgate env
  kernelgate env --json > env.json
  kernelgate env --device cpu        # what the CPU path would do on this machine
"""


def cmd_env(args: argparse.Namespace) -> int:
    from harness import env as envmod

    device = args.device or envmod.default_device()
    snap = envmod.snapshot(device)
    caps = envmod.capabilities(device)
    if args.json:
        print(dumps({"env": snap.to_dict(), "capabilities": caps, "gpus": envmod.query_gpus()}, indent=True))
        return 0
    print(f"device:    {snap.device_kind}  {snap.device_name}" + (f"  ({snap.device_uuid})" if snap.device_uuid else ""))
    if snap.driver:
        print(f"driver:    {snap.driver}")
    print(f"python:    {envmod.python_info()}")
    print(f"torch:     {snap.torch}")
    print(f"triton:    {snap.triton or 'not installed'}")
    print(f"tilelang:  {snap.tilelang or 'not installed'}")
    print(f"kernelgate {snap.harness}")
    print("\nexecution path on this machine:")
    for dsl, how in caps.items():
        print(f"  {dsl:9s} {how}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("env", help="show device, versions and the active execution path",
                       description="Show the device, library versions, and which execution path each DSL takes here "
                                   "(GPU execution, the Triton interpreter, or TileLang lowering only).",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=("cuda", "cpu"), help="describe this device instead of the default")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_env)
