"""Rebuild this slice: ``python data/tau-bench-mini/make_slice.py [DATA_ROOT]`` (default ../shared/data).

Takes the first 6 retail and the first 4 airline *test* tasks of τ-bench, builds their stream
with ``rizz streams build tau-bench`` logic, and copies only the database records they can
touch: the tasks' users (and users named in gold actions), those users' orders / reservations,
every order / reservation a gold action names, all retail products, and every airline flight
those reservations or gold actions name or whose route a gold ``search_*`` call asks about.
Records are copied verbatim; the stream's ``environment.db`` points here.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rizz.lab.builders.tau_bench import tau_elements
from rizz.formats.streams import write_stream

HERE = Path(__file__).resolve().parent
COUNTS = {"retail": 6, "airline": 4}


def _walk(value, key):
    if isinstance(value, dict):
        for k, v in value.items():
            if k == key:
                yield v
            yield from _walk(v, key)
    elif isinstance(value, list):
        for v in value:
            yield from _walk(v, key)


def main(root: Path) -> None:
    elements = []
    for domain, n in COUNTS.items():
        src = root / "tau_bench" / domain
        tasks = json.loads((src / "tasks_test.json").read_text())[:n]
        db = {t: json.loads((src / "db" / f"{t}.json").read_text()) for t in
              (("users", "orders", "products") if domain == "retail" else ("users", "reservations", "flights"))}
        users = {t["user_id"] for t in tasks} | {u for t in tasks for u in _walk(t["actions"], "user_id")}
        keep: dict[str, dict] = {"users": {u: db["users"][u] for u in sorted(users) if u in db["users"]}}
        if domain == "retail":
            orders = {o for u in keep["users"].values() for o in u["orders"]} | set(_walk([t["actions"] for t in tasks], "order_id"))
            keep["orders"] = {o: db["orders"][o] for o in sorted(orders) if o in db["orders"]}
            keep["products"] = db["products"]
        else:
            res = {r for u in keep["users"].values() for r in u["reservations"]} | set(_walk([t["actions"] for t in tasks], "reservation_id"))
            keep["reservations"] = {r: db["reservations"][r] for r in sorted(res) if r in db["reservations"]}
            flights = set(_walk(list(keep["reservations"].values()), "flight_number")) | set(_walk([t["actions"] for t in tasks], "flight_number"))
            routes = {(a["kwargs"]["origin"], a["kwargs"]["destination"]) for t in tasks for a in t["actions"] if a["name"].startswith("search_")}
            flights |= {k for k, f in db["flights"].items() if (f["origin"], f["destination"]) in routes}
            keep["flights"] = {f: db["flights"][f] for f in sorted(flights) if f in db["flights"]}
        out = HERE / domain / "db"
        out.mkdir(parents=True, exist_ok=True)
        for table, records in keep.items():
            (out / f"{table}.json").write_text(json.dumps(records, indent=None, ensure_ascii=False))
        els = tau_elements(root, domain, "test", db=f"tau-bench-mini/{domain}/db")[:n]
        elements += els
    write_stream(HERE / "test.jsonl", elements)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("..") / "shared" / "data")
