"""Stage `tournament`: every candidate answers every query; each pair's correctness,
latency, tokens, power and energy are recorded.

Batches run inside meter windows. A window's energy is split over its requests
by ``jouleroute.energy.attribute_window`` (rule stored per row in
``energy_attribution``). Idle power is measured once per run and process, before
that process loads a model, and recorded with every shard and in the run state.

The work is cut into jobs (``plan_tournament``): consecutive batches of one
candidate, at the serial run's batch boundaries, grouped by model. ``run_job`` runs
one job where it is called (here, or a Dask worker through ``flows/tournament.py``),
metered there, on a model the process loads once per run and keeps
(``loading.py``: loading is metered and reported apart from answering);
``finish_tournament`` checks every pair is there once and writes the profile.

A query without gold (a user's prompt) is answered, metered and read like any other, but not graded: its rows
carry ``correct`` null. A query of a task outside the registry is an open prompt (``open_prompts.py``).
"""

from __future__ import annotations

import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd

from jouleroute.backends import BackendConfig, GenRequest, LoglikRequest, answer_requests, make_backend
from jouleroute.benchmarks import get_task
from jouleroute.energy import EnergyConfig, attribute_window, attribution_rule, make_meter
from jouleroute.pool import CandidateSpec
from jouleroute.provenance import seed_everything, stable_hash
from jouleroute.tournament.jobs import (JobRunner, ProgressFactory, ShardJob, TournamentInputs, TournamentPlan,
                                        candidate_key, config_hash)
from jouleroute.tournament.lanes import metering_lanes, server_of
from jouleroute.tournament.loading import PROCESS_MODELS, model_revision, worker_name
from jouleroute.tournament.open_prompts import (is_open_prompt, note_generated_open_prompts, open_request,
                                                read_open_answer)
from jouleroute.tournament.served import served_meter
from jouleroute.tournament.shards import ShardStore, write_profile

logger = logging.getLogger(__name__)

def build_request(row: pd.Series, candidate: CandidateSpec, data_dir: Path) -> GenRequest | LoglikRequest:
    """What the candidate is sent for this row: a log-likelihood request for a multiple-choice row of a
    ``loglik`` candidate, otherwise a generation request in the candidate's (free-form) style; an open prompt
    (a task outside the registry) is the question alone (``open_prompts``)."""
    if is_open_prompt(row["task"]):
        return open_request(row, candidate)
    task = get_task(row["task"])
    if candidate.answer_style == "loglik":
        scored = task.loglik_request(row, candidate.exemplar_count, data_dir=data_dir)
        if scored is not None:
            return scored
    style = candidate.generation_style
    if candidate.prompt_style == "chat":
        return GenRequest(prompt=None, messages=task.chat_messages(row, style),
                          max_new_tokens=candidate.max_new_tokens, stop=[])
    prompt = task.fewshot_prompt(row, style, k=candidate.exemplar_count, data_dir=data_dir)
    return GenRequest(prompt=prompt, messages=None, max_new_tokens=candidate.max_new_tokens,
                      stop=list(task.stop_sequences(style)))


def plan_tournament(inp: TournamentInputs, run_id: str, batches_per_job: int | None = None) -> TournamentPlan:
    """Open the shard store (quarantining corrupt files), and cut what is left into jobs.

    ``batches_per_job=None``: one job per candidate (the serial run). Jobs come grouped by model
    (first appearance in the pool), so a process that takes them in order meets each model once.
    """
    queries = inp.queries[inp.queries["split"].isin(inp.config.splits)]
    queries = queries.sort_values(["task", "query_id"]).reset_index(drop=True)  # fixed order; similar prompts batch together
    store = ShardStore(inp.shards_dir)
    state = store.open(config_hash(inp))
    keys = {c.candidate_id: candidate_key(c, inp.models[c.model]) for c in inp.pool}
    store.prune(list(keys.values()))
    done = store.done_pairs(list(keys.values()))
    adopted = adopt_live_pairs(inp, store, keys, set(queries["query_id"]), done)
    jobs = []
    model_order = {m: i for i, m in enumerate(dict.fromkeys(c.model for c in inp.pool))}
    lanes = metering_lanes(inp.pool, inp.backend.kind, inp.backend.base_url)
    for candidate in sorted(inp.pool, key=lambda c: model_order[c.model]):  # stable: pool order within a model
        pending = [q for q in queries["query_id"] if (q, candidate.candidate_id) not in done]
        batches = [tuple(pending[i:i + candidate.batch_size]) for i in range(0, len(pending), candidate.batch_size)]
        step = batches_per_job or max(len(batches), 1)
        jobs += [ShardJob(candidate.candidate_id, keys[candidate.candidate_id], tuple(batches[i:i + step]),
                          lanes[candidate.candidate_id])
                 for i in range(0, len(batches), step)]
    logger.info("tournament: %d queries x %d candidates, %d pairs already done (%d of them from the live-pair "
                "cache), %d job(s) to run", len(queries), len(inp.pool), len(done), adopted, len(jobs))
    note_generated_open_prompts(queries["task"], inp.pool)
    if jobs:
        state.setdefault("runs", []).append({"run_id": run_id, "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                                             "jobs": len(jobs)})
        store.save_state(state)
    return TournamentPlan(queries, keys, jobs, len(done), store, state)


def adopt_live_pairs(inp: TournamentInputs, store: ShardStore, keys: dict[str, str], query_ids: set[str],
                     done: set[tuple[str, str]]) -> int:
    """Copy into the shard store the pairs this tournament would run that live rollouts already answered under
    the same config (``paths.live_pairs_dir``, read only): they are not run, nor metered, again. Each copied
    shard's metadata names where it came from. Returns the pairs adopted (``done`` grows by them)."""
    if inp.live_pairs_dir is None:
        return 0
    adopted = 0
    for shard, rows in ShardStore(inp.live_pairs_dir).read_valid(list(keys.values()), store.config_hash):
        fresh = [r for r in rows.to_pylist()
                 if r["query_id"] in query_ids and (r["query_id"], r["candidate_id"]) not in done]
        if fresh:
            store.write(shard.path.parent.name, fresh, {**shard.meta, "adopted_from": str(shard.path)})
            done.update((r["query_id"], r["candidate_id"]) for r in fresh)
            adopted += len(fresh)
    return adopted


def run_tournament(inp: TournamentInputs, run_id: str, progress: ProgressFactory | None = None,
                   run_jobs: JobRunner | None = None, batches_per_job: int | None = None) -> pd.DataFrame:
    """Run (or resume) the tournament; write and return the profile.

    ``run_jobs`` decides where the jobs run (default: here, one after the other).
    """
    seed_everything(inp.config.seed)
    plan = plan_tournament(inp, run_id, batches_per_job)
    if run_jobs is None:
        try:
            reports = _run_here(inp, plan.jobs, run_id, progress)
        finally:
            PROCESS_MODELS.release()  # the serial run is over: free the last model
    else:
        reports = run_jobs(inp, plan.jobs, run_id) if plan.jobs else []
    return finish_tournament(inp, plan, run_id, reports)


def _run_here(inp: TournamentInputs, jobs: list[ShardJob], run_id: str, progress) -> list[dict]:
    """Jobs in this process. Those it meters itself (no lane: local models, served candidates measured on the
    client) run alone, one after the other: the process's meter (its CPU time, or the node's counters) would
    book anything running beside them. Then served candidates on exporters run one thread per lane
    (``lanes.py``: a lane's jobs stay in order, so windows on one exporter GPU never overlap;
    ``backend.concurrency`` requests in flight per server)."""
    own = [r for job in jobs if not job.lane for r in run_job(inp, job, run_id, progress)]
    lanes: dict[str, list[ShardJob]] = {}
    for job in jobs:
        if job.lane:
            lanes.setdefault(job.lane, []).append(job)
    if not lanes:
        return own

    def lane(lane_jobs: list[ShardJob]) -> list[dict]:
        return [r for job in lane_jobs for r in run_job(inp, job, run_id, progress)]

    with ThreadPoolExecutor(max_workers=len(lanes), thread_name_prefix="lane") as threads:
        return own + [r for reports in threads.map(lane, lanes.values()) for r in reports]


def finish_tournament(inp: TournamentInputs, plan: TournamentPlan, run_id: str, reports: list[dict]) -> pd.DataFrame:
    """Record who metered what, check every pair is there exactly once, write the profile."""
    if plan.jobs:
        run = plan.state["runs"][-1]
        run["workers"] = {r["worker"]: {k: r[k] for k in ("idle_power_w", "meter", "device")} for r in reports}
        run["shards"] = [{k: r[k] for k in ("shard", "worker", "rows", "energy_j", "window_s", "energy_source")}
                         for r in reports]
        # loading and warm-up: metered in their own windows, never part of a row's energy_j
        run["model_loads"] = [load for r in reports for load in r.get("model_loads", [])]
        if len(run["workers"]) == 1:  # the serial layout, kept for readers of earlier run states
            run.update(next(iter(run["workers"].values())))
        plan.store.save_state(plan.state)
    profile = plan.store.read_all(list(plan.keys.values()))
    profile = profile[profile["query_id"].isin(set(plan.queries["query_id"]))]
    # a stored pair keeps its answer, not its split: the query table decides it now (new traffic moves older
    # queries from test to train, a query table's time-ordered split)
    profile = profile.assign(split=profile["query_id"].map(plan.queries.set_index("query_id")["split"]))
    _check_complete(profile, plan.queries, inp.pool)
    profile = profile.sort_values(["candidate_id", "query_id"]).reset_index(drop=True)
    write_profile(profile, inp.profile_path)
    return profile


# One meter per process and run: idle power is measured once, before this process loads any model,
# on the device this process sees (a Dask worker per GPU meters its own GPU).
_METERS: dict[str, tuple[object, float, dict]] = {}


def _meter_for(energy: EnergyConfig, run_id: str):
    if run_id not in _METERS:
        meter = make_meter(energy)
        idle_w = meter.measure_idle_power_w(energy.idle_seconds)
        device = {**meter.device_info(), "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}
        _METERS.clear()  # a long-lived worker keeps only the current run's meter
        _METERS[run_id] = (meter, idle_w, device)
    return _METERS[run_id]


def _process_energy(inp: TournamentInputs) -> EnergyConfig:
    """The meter this process uses for its own jobs. A served candidate measured on the client
    (``energy.served_client_estimate``) is always the CPU-time estimate, labelled ``estimated``: a GPU or RAPL
    counter on the client says nothing about the server, and must not label the figure as measured."""
    if inp.backend.kind == "openai":
        return inp.energy.model_copy(update={"meter": "estimate"})
    return inp.energy


def backend_settings(cfg: BackendConfig, cpu_threads: int | None) -> BackendConfig:
    """The params' backend with its CPU threads capped at this process's share of the cores.

    A Dask worker passes its share (``cpu_threads``): two workers on two cores with two
    torch threads each would run four threads on two cores, which spin and inflate both
    the wall time and a CPU-time energy estimate.
    """
    if cpu_threads and cfg.kind != "openai" and (cfg.torch_threads is None or cfg.torch_threads > cpu_threads):
        return cfg.model_copy(update={"torch_threads": cpu_threads})
    return cfg


def _held_model(inp: TournamentInputs, candidate: CandidateSpec, settings: BackendConfig, meter):
    """This process's model for ``candidate``: kept from an earlier job of the run, or loaded now, metered apart.

    Keyed by what decides the loaded weights and how they run: two candidates asking the
    same model share it; new weights (another conversion, revision or folder) load again.
    """
    spec = inp.models[candidate.model]
    revision = model_revision(candidate.model, spec, inp.models_dir)
    key = stable_hash([settings.model_dump(), candidate.model, spec.model_dump(), revision, candidate.base_url])
    record = {"model": candidate.model, "revision": revision, "candidate_id": candidate.candidate_id}
    build = lambda: make_backend(settings, candidate.model, spec, inp.models_dir, candidate.base_url,  # noqa: E731
                                 candidate.api_key_env)
    return PROCESS_MODELS.get(key, inp.config.models_per_worker, build, meter, record), record


def run_job(inp: TournamentInputs, job: ShardJob, run_id: str, progress: ProgressFactory | None = None,
            cpu_threads: int | None = None) -> list[dict]:
    """Run one job's batches in this process, metered here; write one shard per batch.

    The model comes from this process's cache (loaded by an earlier job of this run, or now,
    in its own meter window); a candidate is warmed up once per process, also metered apart.
    The first shard written after a load or warm-up carries its records (``model_loads``).

    Idempotent: a batch whose shard exists (an earlier attempt of this job, on a worker
    that was then lost) is skipped, and rewriting one replaces the file, so no pair is
    ever stored twice.
    """
    seed_everything(inp.config.seed)
    candidate = next(c for c in inp.pool if c.candidate_id == job.candidate_id)
    store = ShardStore(inp.shards_dir)
    store.config_hash = config_hash(inp)
    todo = [b for b in job.batches if not store.path_for(job.key, list(b)).exists()]
    if not todo:
        return []
    if inp.is_served(candidate):
        return _run_served_job(inp, job, candidate, todo, run_id, progress, store)
    PROCESS_MODELS.begin_run(run_id)  # before the idle measurement: a new run starts with no model loaded
    meter, idle_w, device = _meter_for(_process_energy(inp), run_id)
    worker = worker_name()
    rows_by_id = inp.queries.set_index("query_id", drop=False)
    settings = backend_settings(inp.backend, cpu_threads)
    held, record = _held_model(inp, candidate, settings, meter)
    backend = held.backend
    tick = progress(sum(len(b) for b in todo), candidate.candidate_id) if progress else (lambda n: None)
    reports = []
    batches = [rows_by_id.loc[list(b)] for b in todo]
    warmup = batches[: inp.config.warmup_batches] if candidate.candidate_id not in held.warmed else []
    if warmup:  # caches/kernels warmed once per candidate and process, metered apart from any answer
        with meter.window() as box:
            for batch in warmup:
                answer_requests(backend, [build_request(row, candidate, inp.data_dir)
                                          for _, row in batch.head(2).iterrows()])
        PROCESS_MODELS.note("warmup", box[0], record)
    held.warmed.add(candidate.candidate_id)
    for batch in batches:
        requests = [build_request(row, candidate, inp.data_dir) for _, row in batch.iterrows()]
        with meter.window() as box:
            started = time.perf_counter()
            results = answer_requests(backend, requests)
        measurement = box[0]
        shares = attribute_window(measurement, [r.input_tokens for r in results],
                                  [r.output_tokens for r in results], idle_w, inp.energy.prefill_weight)
        rows = [_row(row, candidate, backend, res, share, measurement, idle_w, len(batch), run_id,
                     inp.energy.prefill_weight)
                for (_, row), res, share in zip(batch.iterrows(), results, shares)]
        loads = PROCESS_MODELS.take_records()
        meta = {"run_id": run_id, "worker": worker, "device": device, "meter": measurement.source,
                "idle_power_w": idle_w, "torch_threads": settings.torch_threads}
        path = store.write(job.key, rows, {**meta, "model_loads": loads} if loads else meta)
        reports.append({"shard": f"{job.key}/{path.name}", "worker": worker, "rows": len(rows),
                        "energy_j": float(measurement.energy_j), "window_s": float(measurement.time_s),
                        "energy_source": measurement.source, "idle_power_w": idle_w,
                        "meter": measurement.source, "device": device, "model_loads": loads})
        logger.debug("batch of %d in %.2fs", len(batch), time.perf_counter() - started)
        tick(len(batch))
    return reports


def _run_served_job(inp: TournamentInputs, job: ShardJob, candidate: CandidateSpec, todo, run_id: str,
                    progress: ProgressFactory | None, store: ShardStore) -> list[dict]:
    """A served candidate's batches: its own server, metered on its GPU node (tournament/served.py)."""
    meter = served_meter(run_id, candidate, inp.modelled[candidate.candidate_id], inp.energy.idle_seconds,
                         inp.energy.prefill_weight)
    worker = worker_name()
    rows_by_id = inp.queries.set_index("query_id", drop=False)
    spec = inp.models[candidate.model]
    tick = progress(sum(len(b) for b in todo), candidate.candidate_id) if progress else (lambda n: None)
    reports = []
    with make_backend(inp.backend, candidate.model, spec, inp.models_dir, candidate.base_url,
                      candidate.api_key_env) as backend:
        for ids in todo:
            batch = rows_by_id.loc[list(ids)]
            requests = [build_request(row, candidate, inp.data_dir) for _, row in batch.iterrows()]
            results, energy = meter.measure(lambda: answer_requests(backend, requests))
            rows = [_row(row, candidate, backend, res, share, energy.measurement, energy.idle_power_w, len(batch),
                         run_id, inp.energy.prefill_weight, energy.rule)
                    for (_, row), res, share in zip(batch.iterrows(), results, energy.shares)]
            device = meter.device_info()
            meta = {"run_id": run_id, "worker": worker, "device": device, "meter": energy.measurement.source,
                    "idle_power_w": energy.idle_power_w, "server": server_of(candidate, inp.backend.base_url)}
            path = store.write(job.key, rows, meta)
            reports.append({"shard": f"{job.key}/{path.name}", "worker": f"{worker}/{candidate.candidate_id}",
                            "rows": len(rows), "energy_j": float(energy.measurement.energy_j),
                            "window_s": float(energy.measurement.time_s),
                            "energy_source": energy.measurement.source, "idle_power_w": energy.idle_power_w,
                            "meter": energy.measurement.source, "device": device, "model_loads": []})
            tick(len(batch))
    return reports


def _row(row, candidate, backend, res, share, measurement, idle_w, batch_size, run_id, prefill_weight,
         rule: str | None = None) -> dict:
    open_prompt = is_open_prompt(row["task"])
    grade = read_open_answer(res.text) if open_prompt else get_task(row["task"]).grade_row(res.text, row)
    rule = rule or attribution_rule(prefill_weight)
    energy_j, energy_net_j = share
    return {
        "query_id": row["query_id"], "candidate_id": candidate.candidate_id, "task": row["task"],
        "split": row["split"], "correct": None if grade.correct is None else int(grade.correct),
        "invalid": int(grade.invalid),
        "extracted_answer": grade.extracted, "output_text": res.text,
        "input_tokens": int(res.input_tokens), "output_tokens": int(res.output_tokens),
        "batch_size": int(batch_size), "latency_s": float(res.latency_s),
        "ttft_s": None if res.ttft_s is None else float(res.ttft_s),
        "energy_j": float(energy_j), "energy_net_j": float(energy_net_j), "idle_power_w": float(idle_w),
        "avg_power_w": float(measurement.avg_power_w), "energy_source": measurement.source,
        "energy_attribution": rule, "window_s": float(measurement.time_s),
        "model_id": backend.model_id, "backend": backend.name, "run_id": run_id,
    }


def _check_complete(profile: pd.DataFrame, queries: pd.DataFrame, pool) -> None:
    dupes = profile.duplicated(["query_id", "candidate_id"]).sum()
    expected = len(queries) * len(pool)
    if dupes or len(profile) != expected:
        raise RuntimeError(f"tournament shards hold {len(profile)} rows ({dupes} duplicates); expected {expected}")
