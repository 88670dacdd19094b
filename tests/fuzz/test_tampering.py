"""Tampered claims: a valid solution or schedule the tool wrote, changed so that what it states is no
longer true, must be refused (``verify`` / ``schedule --check`` exit 1 with a violation, or exit 2).

Every tampering here is wrong by construction, whatever the design:

* a stated metric, the objective or the makespan moved by a factor (the evaluator and the schedule
  check recompute them);
* a status or bound the method cannot prove (a heuristic's ``optimal``, a bound above a minimised
  objective, a gap that does not follow from the objective and the bound);
* a design that breaks the cluster: a link count raised or a link dropped on a regular cluster;
* a route that no longer carries its traffic: a path sent to another destination, a route's share
  changed so its pair's shares no longer sum to 1, a ring that visits a member twice, an offset
  route's jump replaced so the jumps no longer add up;
* in a schedule: a task moved, a summary figure changed;
* in a collective schedule: a send removed, sent to itself or moved past the last step, the finish,
  bound, gap or algorithm bandwidth moved, a greedy schedule's status made optimal.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

from fuzz_seeds import collective_schedule_files, schedule_files, solution_files, solutions
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import FUZZ_TALLY, INSTANCES
from topoopt_ilp.cli import main

#: Metrics whose value the evaluator recomputes (text, flags and lists aside).
FACTORS = [0.0, 0.5, 0.9, 0.999, 1.001, 1.1, 2.0, -1.0]
#: Instances with a regular cluster, where every link count is fixed by the degree.
REGULAR = {"mix-8", "dlrm-mini-6", "coprime-circulant-32", "all-to-all-16"}


def _moved(value: float, factor: float) -> float:
    moved = value * factor
    return moved if moved != value else value + 1.0  # a zero claim moves too


def _metric(doc: dict, data) -> None:
    keys = [k for k, v in doc.get("metrics", {}).items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    keys += ["objective"] if isinstance(doc.get("objective"), (int, float)) else []
    key = data.draw(st.sampled_from(keys))
    factor = data.draw(st.sampled_from(FACTORS))
    if key == "objective":
        doc["objective"] = _moved(doc["objective"], factor)
    else:
        doc["metrics"][key] = _moved(doc["metrics"][key], factor)


def _claim(doc: dict, data) -> None:
    """A status, bound or gap the solution cannot back."""
    objective = doc.get("objective")
    kinds = ["optimal"] if doc.get("method") != "exact" else []
    if isinstance(objective, (int, float)) and objective > 0:
        kinds += ["bound above", "gap"]
    kind = data.draw(st.sampled_from(kinds))
    if kind == "optimal":
        doc.update(status="optimal", bound=objective, gap=0.0)
    elif kind == "bound above":  # the objectives here are minimised (iteration time, ASPL)
        doc.update(bound=objective * data.draw(st.sampled_from([1.01, 2.0, 100.0])))
    else:
        doc.update(gap=data.draw(st.sampled_from([0.5, 0.99])) if doc.get("gap") != 0.5 else 0.25)


def _design(doc: dict, data) -> None:
    links = doc["topology"]["links"]
    k = data.draw(st.integers(0, len(links) - 1))
    if data.draw(st.booleans()):
        links[k][2] += 1
    else:
        del links[k]


def _route(doc: dict, data) -> None:
    routing = doc.get("routing", {})
    kinds = [k for k in ("paths", "rings", "offset_routes") if routing.get(k)]
    kind = data.draw(st.sampled_from(kinds))
    entries = routing[kind]
    entry = entries[data.draw(st.integers(0, len(entries) - 1))]
    n = doc["topology"]["servers"]
    if kind == "paths":
        share, path = entry
        if data.draw(st.booleans()) or share < 1e-9:
            path[-1] = next(s for s in range(n) if s not in path)  # another destination: the pair loses it
        else:
            entry[0] = share / 2  # the pair's shares now sum to less than 1
    elif kind == "rings":
        ring = entry[2]
        ring[-1] = ring[0]  # a member twice, one never
    else:
        jumps = entry[2]
        jumps[-1] = jumps[-1] + 1 if jumps[-1] + 1 != 0 else jumps[-1] + 2  # the jumps no longer add up


TAMPERINGS = {"metric": _metric, "claim": _claim, "design": _design, "route": _route}


def _applicable(name: str, doc: dict) -> list[str]:
    out = ["claim"] if doc.get("objective") is not None else []
    if doc.get("metrics") or doc.get("objective") is not None:
        out.append("metric")
    if name in REGULAR:
        out.append("design")
    if any(doc.get("routing", {}).get(k) for k in ("paths", "rings", "offset_routes")):
        out.append("route")
    return out


@settings(parent=settings.get_profile("fuzz"))
@given(data=st.data())
def test_verify_refuses_every_tampered_solution(tmp_path_factory, capsys, data):
    docs = solutions()
    name = data.draw(st.sampled_from(sorted(docs)))
    doc = copy.deepcopy(docs[name])
    kind = data.draw(st.sampled_from(_applicable(name, doc)))
    TAMPERINGS[kind](doc, data)
    path = tmp_path_factory.mktemp("tampered") / "solution.json"
    path.write_text(json.dumps(doc))
    code = main(["verify", str(INSTANCES / f"{name}.json"), str(path)])
    captured = capsys.readouterr()
    FUZZ_TALLY[f"tampered solution ({kind})"][code] += 1
    assert code in (1, 2), f"verify accepted a {kind} tampering of {name}: {captured.out[:500]}"
    assert "internal error" not in captured.err


def test_the_untampered_solutions_pass():
    """The control: every seed solution verifies, so a refusal above is the tampering's doing."""
    for name, path in solution_files().items():
        assert main(["verify", str(INSTANCES / f"{name}.json"), str(path)]) == 0, name


def _shift_task(doc: dict, data) -> None:
    """A task whose times no schedule of the file's claims allows: it runs half its duration, or it
    ends after the claimed makespan. (A task moved or held longer may be another valid schedule:
    durations are rounded up to the time unit, and a task may hold its resources longer.)"""
    unit = doc["time_unit_s"]
    if data.draw(st.booleans()):
        long_tasks = [t for t in doc["tasks"] if t.get("duration_s", 0) > 2 * unit]
        task = data.draw(st.sampled_from(long_tasks))
        task["end_s"] = task["start_s"] + task["duration_s"] / 2
    else:
        task = doc["tasks"][data.draw(st.integers(0, len(doc["tasks"]) - 1))]
        delta = doc["makespan_s"] + unit - task["start_s"]
        task["start_s"] += delta
        task["end_s"] += delta


def _summary_figure(doc: dict, data) -> None:
    section = data.draw(st.sampled_from(["evaluator", "lower_bounds", "top"]))
    table = doc["summary"] if section == "top" else doc["summary"][section]
    keys = [
        k for k, v in table.items() if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "wall_time_s"
    ]
    key = data.draw(st.sampled_from(keys))
    table[key] = _moved(table[key], data.draw(st.sampled_from(FACTORS)))


def _makespan(doc: dict, data) -> None:
    doc["makespan_s"] = _moved(doc["makespan_s"], data.draw(st.sampled_from([0.5, 0.9, 0.999])))


@settings(parent=settings.get_profile("fuzz"))
@given(data=st.data())
def test_schedule_check_refuses_every_tampered_schedule(tmp_path_factory, capsys, data):
    solution, schedule = schedule_files()
    doc = json.loads(Path(schedule).read_text())
    kind = data.draw(st.sampled_from(["task", "summary", "makespan"]))
    {"task": _shift_task, "summary": _summary_figure, "makespan": _makespan}[kind](doc, data)
    path = tmp_path_factory.mktemp("tampered-schedule") / "schedule.json"
    path.write_text(json.dumps(doc))
    code = main(["schedule", str(INSTANCES / "dlrm-mini-6.json"), solution, "--check", str(path)])
    captured = capsys.readouterr()
    FUZZ_TALLY[f"tampered schedule ({kind})"][code] += 1
    assert code in (1, 2), f"--check accepted a {kind} tampering: {captured.out[:500]}"


def test_the_untampered_schedule_passes():
    solution, schedule = schedule_files()
    assert main(["schedule", str(INSTANCES / "dlrm-mini-6.json"), solution, "--check", schedule]) == 0


def _collective_send(doc: dict, data) -> None:
    """Wrong by construction: the written schedule receives each chunk at each server at most once and
    only where it is needed later (the schedules are trimmed), so a send removed leaves a server
    short; a send of the last step moved one step later ends the collective after the claimed
    step; a send to its own sender is no send. (Moving a send elsewhere may give another valid
    schedule, and is not tried.)"""
    sends = doc["sends"]
    how = data.draw(st.sampled_from(["remove", "later", "self"]))
    if how == "later":
        last = [s for s in sends if s[0] == doc["steps"]]
        data.draw(st.sampled_from(last))[0] += 1
        return
    k = data.draw(st.integers(0, len(sends) - 1))
    if how == "remove":
        sends.pop(k)
    else:
        sends[k][3] = sends[k][2]


def _collective_claim(doc: dict, data) -> None:
    key = data.draw(st.sampled_from(["finish_s", "bound_s", "gap", "algbw_Bps", "steps", "bound_steps", "status"]))
    if key == "status":
        doc["status"] = "optimal"  # a greedy schedule never claims it
    elif key in ("steps", "bound_steps"):
        doc[key] += data.draw(st.sampled_from([-1, 1]))
    else:
        doc[key] = _moved(doc[key], data.draw(st.sampled_from(FACTORS)))


@settings(parent=settings.get_profile("fuzz"))
@given(data=st.data())
def test_collective_check_refuses_every_tampered_schedule(tmp_path_factory, capsys, data):
    instance, solution, schedule = collective_schedule_files()
    doc = json.loads(Path(schedule).read_text())
    kind = data.draw(st.sampled_from(["send", "claim"]))
    {"send": _collective_send, "claim": _collective_claim}[kind](doc, data)
    path = tmp_path_factory.mktemp("tampered-collective") / "collective.json"
    path.write_text(json.dumps(doc))
    code = main(["collective", instance, solution, "--check", str(path)])
    captured = capsys.readouterr()
    FUZZ_TALLY[f"tampered collective schedule ({kind})"][code] += 1
    assert code in (1, 2), f"--check accepted a {kind} tampering: {captured.out[:500]}"


def test_the_untampered_collective_schedule_passes():
    instance, solution, schedule = collective_schedule_files()
    assert main(["collective", instance, solution, "--check", schedule]) == 0
