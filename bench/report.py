"""bench/results.md and bench/concurrency.png from bench/results.json."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _f(value: Any, digits: int = 2, unit: str = "") -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}{unit}"
    if isinstance(value, float):
        if value != value:  # NaN
            return "–"
        if abs(value) >= 1000:
            return f"{value:,.0f}{unit}"
        return f"{value:.{digits}f}{unit}"
    return str(value)


def _x(value: Any) -> str:
    return "–" if value is None else f"{value:.2f}×"


def _met(value: Any, target: str) -> str:
    """✅/❌ for a target written as "<= 5", ">= 5000", "0" or "all"; blank for "report"."""
    if target == "report":
        return ""
    if value is None:
        return "?"
    if isinstance(value, bool):
        return "✅" if value else "❌"
    op, _, num = target.partition(" ")
    if not num:  # an exact count, e.g. "0" lock errors
        return "✅" if value == float(op) else "❌"
    limit = float(num)
    return "✅" if (value <= limit if op == "<=" else value >= limit) else "❌"


def _get(d: dict[str, Any], *path: str) -> Any:
    for p in path:
        if not isinstance(d, dict):
            return None
        d = d.get(p)  # type: ignore[assignment]
    return d


def markdown(results: dict[str, Any]) -> str:
    m = results["machine"]
    s = results["sections"]
    out = [
        f"# Benchmark results ({results['mode']})",
        "",
        f"{results['started']} · {m['cores']} cores ({m['usable_cores']} usable) · "
        f"Python {m['python']} · SQLite {m['sqlite']} · "
        + " · ".join(f"{k} {v}" for k, v in m["packages"].items() if v)
        + f" · load average {', '.join(f'{x:.2f}' for x in m['load_average'] or [])} at start"
        + (
            f", {', '.join(f'{x:.2f}' for x in m.get('load_average_end') or [])} at end"
            if m.get("load_average_end")
            else ""
        )
        + f" · {results['seconds']:.0f} s in all",
        "",
        "Medians unless marked; every ratio is against a baseline measured in the same run. "
        "Benchmarks report, they never fail on a number.",
        "",
        "## Targets",
        "",
        "| § | measure | value | target | |",
        "|---|---|---|---|---|",
    ]
    names = {
        "write": "§1",
        "turn": "§2/§3",
        "delivery": "§4",
        "contention": "§5",
        "calls": "§6",
        "history": "§7",
        "startup": "§8",
        "search": "§9",
        "voice": "§10",
        "speech": "§10 real audio",
        "web": "§11",
    }
    for key, label in names.items():
        sec = s.get(key) or {}
        if "error" in sec:
            out.append(f"| {label} | **section failed**: {sec['error']} | | | |")
            continue
        for name, t in (sec.get("targets") or {}).items():
            value = t.get("value")
            out.append(
                f"| {label} | {name.replace('_', ' ')} | "
                f"{_f(value, 3 if isinstance(value, float) and abs(value) < 10 else 2)} | {t['target']} | "
                f"{_met(value, t['target'])} |"
            )
    out += _write(s.get("write") or {})
    out += _turn(s.get("turn") or {})
    out += _delivery(s.get("delivery") or {})
    out += _contention(s.get("contention") or {})
    out += _calls(s.get("calls") or {})
    out += _history(s.get("history") or {})
    out += _startup(s.get("startup") or {})
    out += _search(s.get("search") or {})
    out += _voice(s.get("voice") or {})
    out += _speech(s.get("speech") or {})
    out += _web(s.get("web") or {})
    for key, sec in s.items():
        if isinstance(sec, dict) and "error" in sec:
            out += ["", f"### {key} failed", "", "```", str(sec.get("stderr", ""))[-2000:], "```"]
    return "\n".join(out) + "\n"


def _write(w: dict[str, Any]) -> list[str]:
    if "sequential" not in w:
        return []
    out = [
        "",
        "## §1 Persist one state change (UPDATE + event INSERT, committed)",
        "",
        f"Sequential: {w['rounds']} interleaved rounds × {w['changes_per_round']} changes per path. "
        "Loop CPU is the event-loop thread's CPU time per change; process CPU counts every thread.",
        "",
        "| path | sync | median ms | p99 ms | loop CPU ms | process CPU ms | × faster peer (defaults) | × faster peer (NORMAL) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for e in w["sequential"].values():
        out.append(
            f"| {e['label']} | {e['synchronous']} | {_f(e['ms']['median'], 3)} | {_f(e['ms']['p99'], 3)} | "
            f"{_f(e['loop_cpu_ms_per_change'], 3)} | {_f(e['process_cpu_ms_per_change'], 3)} | "
            f"{_x(e['ratio_vs_faster_peer_default'])} | {_x(e['ratio_vs_faster_peer_normal'])} |"
        )
    out += [
        "",
        "Concurrent writers in one process (frontdesk TaskStore.transition, NORMAL; each writer "
        "owns one task and flips it back and forth):",
        "",
        "| writers | changes/s | median ms | p99 ms | changes per commit | loop CPU ms/change | lock errors |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in w["concurrency_curve"]:
        out.append(
            f"| {c['writers']} | {_f(c['per_second'], 0)} | {_f(c['latency_ms']['median'])} | "
            f"{_f(c['latency_ms']['p99'])}{_runs(c)} | {_f(c['changes_per_commit'], 1)} | "
            f"{_f(c['loop_cpu_ms_per_change'], 3)} | {c['lock_errors']} |"
        )
    out += [
        "",
        "Peers under the same load:",
        "",
        "| peer | writers | changes/s | p99 ms |",
        "|---|---|---|---|",
    ]
    for name, runs in w["peers_concurrent"].items():
        for c in runs:
            out.append(
                f"| {name} | {c['writers']} | {_f(c['per_second'], 0)} | {_f(c['latency_ms']['p99'])} |"
            )
    return out


def _runs(c: dict[str, Any]) -> str:
    each = c.get("p99_ms_of_each_run") or []
    return (
        f" (median of {len(each)} runs: {', '.join(_f(x) for x in each)})" if len(each) > 1 else ""
    )


def _turn(t: dict[str, Any]) -> list[str]:
    if "overhead" not in t:
        return []
    out = [
        "",
        "## §2 Tool-turn overhead (same session, same ScriptedLLM; bare LiveKit tool is the baseline)",
        "",
        f"{t['turns_per_variant']} turns per variant, alternating.",
        "",
        "| pattern | bare median ms | frontdesk median ms | added ms | ratio |",
        "|---|---|---|---|---|",
    ]
    for p, v in t["overhead"].items():
        out.append(
            f"| {p} | {_f(v['bare_ms']['median'])} | {_f(v['frontdesk_ms']['median'])} | "
            f"{_f(v['median_added_ms'])} | {_x(v['median_ratio'])} |"
        )
    i = t["interrupt"]
    out += [
        "",
        "## §3 Interrupt to settled",
        "",
        "| | median ms | p99 ms | n |",
        "|---|---|---|---|",
        f"| frontdesk: interrupt() → cancelled row committed | {_f(_get(i, 'frontdesk_ms', 'median'))} | "
        f"{_f(_get(i, 'frontdesk_ms', 'p99'))} | {_get(i, 'frontdesk_ms', 'n')} |",
        f"| bare LiveKit tool: interrupt() → work cancelled | {_f(_get(i, 'bare_ms', 'median'))} | "
        f"{_f(_get(i, 'bare_ms', 'p99'))} | {_get(i, 'bare_ms', 'n')} |",
        f"| ratio | {_x(i.get('median_ratio'))} | {_x(i.get('p99_ratio'))} | |",
    ]
    if i.get("errors"):
        out.append(f"\nErrors: {i['errors']}")
    return out


def _delivery(d: dict[str, Any]) -> list[str]:
    if "latency_ms" not in d:
        return []
    lat, idle = d["latency_ms"], d["idle"]
    return [
        "",
        "## §4 Delivery (runner in another process → follow-up generate_reply in the call)",
        "",
        f"{d['jobs']} jobs, {d['missed']} missed; watcher poll {d['poll_seconds']} s "
        "(production default).",
        "",
        "| median ms | p95 ms | p99 ms | max ms | p95 in poll intervals |",
        "|---|---|---|---|---|",
        f"| {_f(lat.get('median'))} | {_f(lat.get('p95'))} | {_f(lat.get('p99'))} | "
        f"{_f(lat.get('max'))} | {_x(d.get('p95_in_poll_intervals'))} |",
        "",
        f"Idle, {idle['calls']} calls for {idle['seconds']} s: process CPU "
        f"{_f(idle['process_cpu_percent_watching'])}% of a core watching, "
        f"{_f(idle['process_cpu_percent_unwatched'])}% with the watch off "
        f"({_x(idle['ratio_watching_vs_unwatched'])}); the watch costs "
        f"**{_f(idle['watch_percent_of_core_per_call'], 3)}% of a core per call**, the whole idle "
        f"call process {_f(idle['process_percent_of_core_per_call'], 3)}% per call.",
    ]


def _row(name: str, d: dict[str, Any], spread: str = "p99") -> str:
    """A table row: median, ``spread`` (p95 or p99), max and count."""
    return (
        f"| {name} | {_f(d.get('median'))} | {_f(d.get(spread))} | {_f(d.get('max'))} | "
        f"{d.get('n', 0)} |"
    )


def _voice(v: dict[str, Any]) -> list[str]:
    if "barge_in_ms" not in v:
        return []

    def row(name: str, d: dict[str, Any]) -> str:
        return _row(name, d)

    return [
        "",
        "## §10 Voice pipeline (fake VAD/STT/TTS, real AgentSession, pausable output)",
        "",
        f"Minimum interruption duration {_f(v['min_interruption_ms'], 0)} ms.",
        "",
        "| measure | median ms | p99 ms | max ms | n |",
        "|---|---|---|---|---|",
        row("caller starts speaking → interruptible row committed `cancelled`", v["barge_in_ms"]),
        row("`runtime.interrupt()` → row committed `cancelled`", v["interrupt_api_ms"]),
        row("ack `say` → first audio frame, cached clip", v["ack_cached_ms"]),
        row("ack `say` → first audio frame, TTS (fake, 0 ms TTFB)", v["ack_uncached_ms"]),
        "",
        f"Follow-ups delivered while the caller talked: {v['deliveries']}; syntheses per "
        f"delivery {v['syntheses_per_delivery']}; offers {v['followup_offers']}.",
    ]


def _speech(v: dict[str, Any]) -> list[str]:
    if "barge_in_from_onset_ms_loaded" not in v:
        return []

    def row(name: str, d: dict[str, Any]) -> str:
        return _row(name, d, "p95")

    sounds = v["sound_trials"] + v["backchannel_trials"]
    held = [t for t in sounds if t["held"]]
    critical = v["critical_trials"]
    return [
        "",
        "## §10 Voice on real audio (Silero on espeak-ng/sox clips in real time, timed STT)",
        "",
        f"Minimum interruption duration {_f(v['min_interruption_ms'], 0)} ms. Barge-in is timed "
        "from the clip's first sample to the `cancelled` row's commit; the loaded trials ran with "
        "two `yes` processes beside them, interleaved with the baseline trials.",
        "",
        "| barge-in from acoustic onset | median ms | p95 ms | max ms | n |",
        "|---|---|---|---|---|",
        row("two CPU hogs beside the run", v["barge_in_from_onset_ms_loaded"]),
        row("baseline (the machine as it was)", v["barge_in_from_onset_ms_baseline"]),
        row(
            "of which: onset → the STT's first words (loaded)",
            v["first_words_from_onset_ms_loaded"],
        ),
        row(
            "of which: first words → row committed, frontdesk (loaded)",
            v["first_words_to_cancelled_ms_loaded"],
        ),
        "",
        f"Not cancelled at all: {v['barge_in_missed']}. Under load: "
        f"{len(v['sound_trials'])} sounds without words and {len(v['backchannel_trials'])} "
        f"backchannels over a lookup: **{v['false_cancels']} false cancels**, {v['dead_air']} "
        f"results not heard, {v['turns_from_sounds']} turns started; {len(held)} results were "
        "held (the lookup ended while the VAD still heard the sound). "
        f"{len(critical)} words clips over critical work or its result: "
        f"**{v['dropped_turns']} dropped turns** ('skipping reply' logged "
        f"{v['skipping_reply_logged']} times), hold line for "
        f"{v['hold_lines_for_words_during_work']} of "
        f"{sum(t['during'] == 'work' for t in critical)} spoken during the work.",
    ]


def _contention(c: dict[str, Any]) -> list[str]:
    if "realistic_16_processes" not in c:
        return []
    out = [
        "",
        "## §5 16 call processes + 1 runner process on one SQLite file",
        "",
        "| run | writes | writes/s | median ms | p99 ms | max ms | × p99 of 1 process | lock errors | errors | rows | all accounted for |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in ("baseline_1_process", "realistic_16_processes", "burst_16_processes"):
        r = c[name]
        out.append(
            f"| {name.replace('_', ' ')} | {r['writes']:,} | {_f(r['writes_per_second'], 0)} | "
            f"{_f(r['latency_ms'].get('median'))} | {_f(r['latency_ms'].get('p99'))} | "
            f"{_f(r['latency_ms'].get('max'))} | {_x(r.get('p99_ratio_vs_1_process'))} | "
            f"{r['lock_errors']} | {r['errors']} | {r['rows']:,} / {r['rows_expected']:,} | "
            f"{_f(r['all_accounted_for'])} |"
        )
    return out


def _calls(c: dict[str, Any]) -> list[str]:
    if "runs" not in c:
        return []
    base = _get(c, "idle_baseline", "lag_ms") or {}
    out = [
        "",
        "## §6 Concurrent calls in one process (simulate, embedded runner)",
        "",
        f"Largest N with zero errors and loop-lag p99 ≤ 25 ms: **{c['largest_passing_n']}**"
        + (
            f" (the ladder stopped at {c['ladder_stopped_at']})"
            if c.get("ladder_stopped_at")
            else " (every N tried passed; the real limit is higher)"
        )
        + f". Idle loop lag p99 {_f(base.get('p99'))} ms.",
        "",
        "| calls | tool calls | wall s | errors | lag median ms | lag p99 ms | lag max ms | p99 × idle | passes |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in c["runs"]:
        lag = r.get("lag_ms") or {}
        out.append(
            f"| {r['calls']} | {r.get('tool_calls', '–')} | {_f(r.get('wall_seconds'), 1)} | "
            f"{r['errors']} | {_f(lag.get('median'))} | {_f(lag.get('p99'))} | "
            f"{_f(lag.get('max'))} | {_x(r.get('lag_p99_ratio_vs_idle'))} | "
            f"{_f(r.get('passes'))} |"
        )
    return out


def _history(h: dict[str, Any]) -> list[str]:
    if "last_20" not in h:
        return []
    l20, cli, st = h["last_20"], h["cli"], h["stats"]
    return [
        "",
        f"## §7 History ({h['rows']:,} tasks; generated in {h['load_seconds']:.1f} s)",
        "",
        "| measure | median | p99 | baseline | ratio |",
        "|---|---|---|---|---|",
        f"| a caller's last 20 tasks (TaskStore.list) | {_f(l20['frontdesk_ms']['median'])} ms | "
        f"{_f(l20['frontdesk_ms']['p99'])} ms | raw sqlite3 {_f(l20['raw_sqlite3_ms']['median'], 3)} ms | "
        f"{_x(l20['ratio_vs_raw'])} |",
        f"| `frontdesk tasks list` wall | {_f(cli['frontdesk_tasks_list_ms']['median'], 0)} ms | | "
        f"`python -c pass` {_f(cli['python_c_pass_ms']['median'], 0)} ms | {_x(cli['ratio'])} |",
        *(
            f'| `python -c "{f["code"]}"` wall ({name}) | {_f(f["ms"]["median"], 0)} ms | | '
            f"`python -c pass` | {_x(f['ratio'])} |"
            for name, f in cli.get("floors", {}).items()
        ),
        f"| TaskStore.stats() | {_f(st['store_stats_seconds'].get('median'))} s | | | |",
        f"| `frontdesk tasks stats` wall | {_f(st['cli_tasks_stats_seconds'])} s | | | |",
        "",
        f"Query plan for the last 20: `{'; '.join(l20['query_plan'])}`.",
    ]


def _startup(s: dict[str, Any]) -> list[str]:
    if "added_ms" not in s:
        return []
    a, b = s["no_plugins"], s["fifty_plugins"]
    return [
        "",
        "## §8 Plugin discovery and registry building (fresh interpreter each time)",
        "",
        "| | plugins | tools | host.load median ms | p95 ms |",
        "|---|---|---|---|---|",
        f"| built-ins only | {a['plugins']} | {a['tools']} | {_f(a['load_ms']['median'], 1)} | {_f(a['load_ms']['p95'], 1)} |",
        f"| + 50 installed plugins | {b['plugins']} | {b['tools']} | {_f(b['load_ms']['median'], 1)} | {_f(b['load_ms']['p95'], 1)} |",
        f"| added | | | **{_f(s['added_ms'], 1)}** ({_x(s['ratio'])}) | |",
        *(
            [
                "",
                "`Registry.observe`, five events with a raising, a hanging and an async observer "
                f"loaded: median {_f(s['observe_five_ms']['median'], 3)} ms, "
                f"p99 {_f(s['observe_five_ms']['p99'], 3)} ms (it only queues).",
            ]
            if "observe_five_ms" in s
            else []
        ),
    ]


def _search(s: dict[str, Any]) -> list[str]:
    if "queries" not in s:
        return []
    out = [
        "",
        "## §9 Knowledge-base search with hostile queries (demo KB, index built)",
        "",
        f"Each query {s['reps']} times through `search_kb`; tests/test_search.py checks the answers.",
        "",
        "| query | median ms | max ms |",
        "|---|---|---|",
    ]
    for label, q in s["queries"].items():
        out.append(f"| {label} | {_f(q['median'], 2)} | {_f(q['max'], 2)} |")
    return out


def _web(w: dict[str, Any]) -> list[str]:
    if "listing" not in w:
        return []
    li, lv = w["listing"], w["live"]
    out = [
        "",
        f"## §11 Web console: GET /api/tasks first page at {li['rows']:,} rows "
        f"(generated in {li['load_seconds']:.1f} s), through the whole app",
        "",
        "| filter | median ms | p99 ms | CPU ms (median) | rows | plain SELECT on raw sqlite3 ms | plan of the plain SELECT |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, f in li["filters"].items():
        out.append(
            f"| {name} | {_f(f['ms']['median'])} | {_f(f['ms']['p99'])} | "
            f"{_f((f.get('cpu_ms') or {}).get('median'))} | {f['rows_returned']} | "
            f"{_f(f['raw_sqlite3_ms']['median'], 3)} | `{'; '.join(f['plan'])}` |"
        )
    pg = w.get("listing_postgres") or {}
    if "filters" in pg:
        out += [
            "",
            f"The same on Postgres ({pg['rows']:,} rows, generated in {pg['load_seconds']:.1f} s):",
            "",
            "| filter | median ms | p99 ms | CPU ms (median) | rows |",
            "|---|---|---|---|---|",
            *(
                f"| {name} | {_f(f['ms']['median'])} | {_f(f['ms']['p99'])} | "
                f"{_f((f.get('cpu_ms') or {}).get('median'))} | {f['rows_returned']} |"
                for name, f in pg["filters"].items()
            ),
        ]
    elif "skipped" in pg:
        out += ["", f"Postgres listing skipped: {pg['skipped']}"]
    for label, lv in (("SQLite", w["live"]), ("Postgres", w.get("live_postgres") or {})):
        if "clients" not in lv:
            if "skipped" in lv:
                out += ["", f"SSE on {label} skipped: {lv['skipped']}"]
            continue
        out += [
            "",
            f"{label}: {lv['clients']} SSE clients, {lv['commits']} commits by another process: "
            f"commit -> each client median {_f(lv['commit_to_each_client_ms'].get('median'))} ms, "
            f"p95 {_f(lv['commit_to_each_client_ms'].get('p95'))} ms; -> the last of the "
            f"{lv['clients']} median {_f(lv['commit_to_last_client_ms'].get('median'))} ms, p95 "
            f"{_f(lv['commit_to_last_client_ms'].get('p95'))} ms; server CPU with all clients "
            f"idle {_f(lv['idle_cpu_percent_of_a_core'])}% of a core over {lv['idle_seconds']:.0f} s.",
        ]
    st = w.get("stats_storm") or {}
    if "baseline" in st:
        out += [
            "",
            f"Stats storm at {st['rows']:,} tasks: {st['stats_clients']} clients asking "
            f"`/api/stats?window=all` back to back for {st['seconds']:.0f} s beside one asking "
            "`/api/tasks?limit=50`:",
            "",
            "| server | listing median ms | listing p99 ms | listing max ms | stats answers "
            "| stats median ms | aggregates run |",
            "|---|---|---|---|---|---|---|",
        ]
        for name in ("baseline", "cached", "uncached"):
            r = st[name]
            out.append(
                f"| {name} | {_f(r['listing_ms'].get('median'))} | {_f(r['listing_ms'].get('p99'))}"
                f" | {_f(r['listing_ms'].get('max'))} | {r['stats_status'] or '-'} | "
                f"{_f(r['stats_ms'].get('median'))} | {r['aggregates_computed']} |"
            )
    return out


def chart(results: dict[str, Any], path: Path) -> Path | None:
    """The concurrency curves: writers in one process (§1) and calls in one process (§6)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    write = results["sections"].get("write") or {}
    calls = results["sections"].get("calls") or {}
    fig, (ax1, ax3) = plt.subplots(1, 2, figsize=(12, 4.5))
    curve = write.get("concurrency_curve") or []
    if curve:
        xs = [c["writers"] for c in curve]
        ax1.plot(
            xs,
            [c["per_second"] for c in curve],
            "o-",
            color="tab:blue",
            label="frontdesk changes/s",
        )
        for name, style in (("langgraph_default", "s--"), ("openai_default", "^--")):
            runs = (write.get("peers_concurrent") or {}).get(name) or []
            if runs:
                ax1.plot(
                    [c["writers"] for c in runs],
                    [c["per_second"] for c in runs],
                    style,
                    alpha=0.6,
                    label=f"{name.replace('_default', '')} (FULL) changes/s",
                )
        ax1.set_xscale("log")
        ax1.set_xlabel("concurrent writers in one process")
        ax1.set_ylabel("state changes per second")
        ax1.axhline(5000, color="grey", lw=0.8, ls=":")
        ax2 = ax1.twinx()
        ax2.plot(
            xs,
            [c["latency_ms"]["p99"] for c in curve],
            "x-",
            color="tab:red",
            label="frontdesk p99 ms",
        )
        ax2.set_ylabel("p99 latency (ms)", color="tab:red")
        ax2.axhline(50, color="tab:red", lw=0.8, ls=":")
        lines = ax1.get_legend_handles_labels()
        lines2 = ax2.get_legend_handles_labels()
        ax1.legend(lines[0] + lines2[0], lines[1] + lines2[1], fontsize=8, loc="center left")
        ax1.set_title("§1 group commit: throughput and p99 vs writers")
    runs = calls.get("runs") or []
    if runs:
        ns = [r["calls"] for r in runs]
        ax3.plot(
            ns, [(r.get("lag_ms") or {}).get("p99") for r in runs], "o-", label="loop lag p99 ms"
        )
        ax3.plot(
            ns,
            [(r.get("lag_ms") or {}).get("median") for r in runs],
            ".-",
            label="loop lag median ms",
        )
        ax3.axhline(25, color="grey", lw=0.8, ls=":", label="25 ms target")
        ax3.set_xlabel("concurrent calls in one process")
        ax3.set_ylabel("event-loop lag (ms)")
        ax3.legend(fontsize=8)
        ax3.set_title(
            f"§6 calls per process (largest passing N = {calls.get('largest_passing_n')})"
        )
    fig.suptitle(
        f"frontdesk benchmarks ({results['mode']}), {results['machine']['cores']} cores, "
        f"SQLite {results['machine']['sqlite']}"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
