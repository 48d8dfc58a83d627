#!/usr/bin/env python3
"""The sweep fault test (run it through scripts/check/fault-test.sh).

Runs a small sweep once without faults as the reference, then again from scratch while
injecting faults at random moments drawn from a seed, starting `sweep run` again after each
fault until the sweep is done; rounds go on, each from scratch, until the asked number of
faults has been injected. Faults:

  runner-kill9   kill -9 of the `sweep run` process
  child-kill9    kill -9 of one of its `train` or `inspect` children
  sigterm        SIGTERM to `sweep run` (a clean stop)
  second-runner  a second `sweep run` of the same sweep started beside the first
  efbig          `sweep run` started under `ulimit -f` with SIGXFSZ ignored, so that a
                 checkpoint or report write of its children fails with EFBIG

and, while `sweep run` runs or between two runners (drawn at random), damage that keeps
every file's size, and the hand-run commands a user might type beside a sweep:

  weights-flip      the sign of every third float of one run's model.safetensors flipped in
                    place (same size, same mtime), preferably a run whose report is not
                    finished (the sweep then measures the damaged weights)
  weights-flip-no-checkpoints
                    the same, and the run's checkpoints/ deleted (as to save space): no
                    checkpoint can write the weights again
  report-flip       one file of a finished or unfinished report changed in place, same size
                    (a digit of a text file, the sign of floats of a .safetensors)
  foreign-report    `headlab inspect RUN_j --out RUN_i/inspect`: another run's report
                    written into this run's report directory
  inspect-options   `headlab inspect RUN --probe P` by hand, P not the sweep's; or the sweep
                    file's `[inspect] probe` edited for one `sweep run`, then restored
  concurrent-inspect
                    two `headlab inspect RUN` started at once into the run's own report
                    directory, one with the sweep's probe and one with another (beside the
                    sweep's own inspect, when it runs): one writes at a time, the others
                    refused as held (exit 75); once they end, a sealed report must be one
                    reading (`headlab verify` of it passes, under its lock)
  foreign-out       `headlab inspect RUN --out DIR` and `headlab compare RUN_i RUN_j --out DIR`
                    into a user's directory (an index.html, a summary.json, a
                    figures/attention.svg, a compare.html and a matching.json of the user's):
                    each must be refused, every file of the directory left as it was
  early-train-kill  kill -9 of a `headlab train` of a run not started yet, 0-30 ms after its
                    start (at a random moment, or as a file of its start appears: the lock,
                    .run.json.tmp-PID, config.toml, .metrics.jsonl.tmp-PID), with exactly the
                    command the sweep gives it (from the reference's log)

After a fault the sweep must still end equal to the reference: `sweep run` is started
again until every run is done, at least once after the last fault of these kinds (a
runner that ran while one was injected may have looked at that run before), and after
same-size damage `sweep verify` (what a user runs to find it: `sweep run` compares sizes
only) until it passes. A round is stuck when a run's failure record stays the same over 3
runners that no fault touched (the sweep tried it again and failed the same way), or when
it is still not done after 3 runners without a fault: reported with `sweep status`, a
failure, and the next round starts. A runner that outlives --runner-timeout is killed and
reported. Every fault and what it did is written to
OUT/faults.log (and printed with --verbose).

Then, in the last round's finished sweep, it damages finished runs at random (--corrupt of
them, one at a time): one file of the run or of its report, listed in their manifests (the
manifests too), cut short, deleted or with a byte flipped. After each it asserts that
`sweep report` does not count the run as done, then that `sweep run` repairs it and
`sweep verify` passes, and compares the run with the reference again.

Then it prints one table: faults injected by kind; runs whose final weights, metrics (their
wall-clock fields `tokens_per_s` and `elapsed_s` left out), snapshots and `inspect` report
(every file of it, provenance.json too, but its manifest of hashes) equal the reference
run's byte for byte; sweeps whose `sweep report` (report.json, `ms_per_step` left out)
equals the reference's; runs lost or redone from step 0 after a checkpoint existed (watched
while the sweep runs); spurious failure records (one that blames another process's lock,
or one still there when its run is done); processes left running (a `train`, `inspect` or
`sweep` of the test still alive 3 s after its runner ended); stuck rounds and hung runners.
Each run that differs is listed with its files that differ, how, and the faults that
touched it. It exits 1 unless every run and sweep report equals the reference, every
damaged run was kept out of the report and repaired, and the other counts are 0.

Standard library only.
"""

import argparse
import json
import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

# Faults to the runner and its children.
RUNNER_KINDS = ["runner-kill9", "child-kill9", "sigterm", "second-runner", "efbig"]
# Damage and hand-run commands beside the sweep, injected while a runner runs or between two
# (local mode only).
BESIDE_KINDS = ["weights-flip", "weights-flip-no-checkpoints", "report-flip",
                "foreign-report", "inspect-options", "early-train-kill",
                "concurrent-inspect", "foreign-out"]
KINDS = RUNNER_KINDS + BESIDE_KINDS
# Same-size damage: only reading every byte finds it (`sweep verify`, `sweep report`).
SAME_SIZE_KINDS = {"weights-flip", "weights-flip-no-checkpoints", "report-flip"}
# With --slurm: the sweep is a job array submitted with `sweep submit --slurm`; the faults
# are the scheduler's and the runner's side of it.
#   scancel        `scancel` of one running array task (Slurm sends SIGTERM, then SIGKILL)
#   task-kill9     kill -9 of one `sweep task` process
#   child-kill9    kill -9 of the `train` or `inspect` of one task
SLURM_KINDS = ["scancel", "task-kill9", "child-kill9"]
# Metrics fields that hold wall-clock time: left out when comparing with the reference.
TIMING_FIELDS = {"tokens_per_s", "elapsed_s"}
# The same in `sweep report`'s report.json (a run's number, and its estimate per point).
REPORT_TIMING_FIELDS = {"ms_per_step"}
# The sweep file's `[inspect] probe`, and others for the inspect-options fault.
SWEEP_PROBE = 8
OTHER_PROBES = [2, 4, 16]
# Fault-free runners after which a round that is still not done counts as stuck.
STUCK_AFTER = 3
# Where early-train-kill may kill `train`: at a random moment of its first 30 ms, or as soon
# as one of these appears in its run directory (still within 30 ms): the states a kill there
# leaves (the lock alone, run.json half-made, the config without metrics, ...).
EARLY_KILL_STAGES = ["timed", ".lock", ".run.json.tmp-", "config.toml", ".metrics.jsonl.tmp-"]
# ulimit -f for the efbig fault, in blocks of 1024 bytes: above a log line or a metrics
# record, below a checkpoint of the model (about 200 KiB) and the report's tensors.
EFBIG_BLOCKS = 96


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--faults", type=int, default=50, help="faults to inject (default 50)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the fault schedule")
    parser.add_argument("--runs", type=int, default=4, help="runs in the sweep (seeds)")
    parser.add_argument("--config", default="recall",
                        help="the shipped config the sweep trains (default recall)")
    parser.add_argument("--steps", type=int, default=600,
                        help="training steps per run (default 600: a run outlives the 3 s "
                             "in which a killed runner's children must stop)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", default="runs/fault-test", help="working directory")
    parser.add_argument("--bin", required=True, help="directory of the release build (its headlab binary)")
    parser.add_argument("--group-seeds", type=int, default=0,
                        help="train the seeds in groups of this many (the sweep file's "
                             "group_seeds; default 0: each seed alone), the reference too")
    parser.add_argument("--corrupt", type=int, default=10,
                        help="finished runs damaged at random at the end (default 10)")
    parser.add_argument("--slurm", action="store_true",
                        help="submit the sweep to Slurm (sweep submit --slurm) instead")
    parser.add_argument("--kinds",
                        help="comma-separated faults to draw from (default: all; with "
                             f"--slurm: {', '.join(SLURM_KINDS)}; else: {', '.join(KINDS)})")
    parser.add_argument("--runner-timeout", type=float, default=None,
                        help="seconds after which a `sweep run` counts as hung and is killed "
                             "(default: 10 times the reference's, at least 120)")
    parser.add_argument("--verbose", action="store_true",
                        help="print each fault as it is injected (always in OUT/faults.log)")
    args = parser.parse_args()
    allowed = SLURM_KINDS if args.slurm else KINDS
    if args.kinds:
        kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
        unknown = [k for k in kinds if k not in allowed]
        if unknown or not kinds:
            parser.error(f"--kinds: {', '.join(unknown) or 'none given'}; "
                         f"{'with --slurm ' if args.slurm else ''}one of {', '.join(allowed)}")
        args.kinds = list(dict.fromkeys(kinds))
    else:
        args.kinds = allowed
    return args


class Test:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.out = Path(args.out).resolve()
        self.work = self.out / "work"  # every sweep runs here, so paths in files match
        self.sweep_file = self.out / "fault.toml"
        self.bin = Path(args.bin).resolve()
        self.kinds = args.kinds
        self.injected = {kind: 0 for kind in self.kinds}
        self.redone = set()
        self.deleted_checkpoints = set()  # (round, run) whose checkpoints a fault deleted
        self.spurious = set()
        self.left_running = 0
        self.left_commands = []  # (round, fault, command line) of each process left
        self.last_kind = None
        self.whole = False  # the last attempt's runner ran to its end untouched by a fault
        self.compared = []  # (round, run, equal, why)
        self.explained = {}  # (round, run) -> lines: each file that differs and how
        self.reports = []  # (round, sweep report equal to the reference's, why)
        self.corrupted = []  # (run, file, how, reported as done, repaired to the reference)
        self.stuck = []  # (round, why): not done after STUCK_AFTER fault-free runners
        self.hung = []  # (round, fault, what): a command killed after its timeout
        self.touched = {}  # (round, run) -> faults that named the run
        self.temporaries = []  # (round, path): temporary files left in a run directory
        self.faults_log = self.out / "faults.log"
        self.watch_reset = set()  # runs whose checkpoints the test deleted itself
        self.pending = False  # a fault beside the sweep that no runner has looked at since
        self.beside = False  # a fault beside the sweep in this round
        self.unverified = False  # same-size damage that no `sweep verify` has read since
        self.train_commands = {}  # run -> the `headlab train` command the sweep gave it
        self.mixed = []  # (round, run, why): a sealed report that is not one reading
        self.trampled = []  # (round, command, why): a user's directory written into

    # ---------------------------------------------------------------- the sweep
    def write_sweep(self, probe=SWEEP_PROBE):
        """The sweep file; `probe` other than SWEEP_PROBE only for one runner of the
        inspect-options fault (then written again as it was, byte for byte)."""
        repo = Path(__file__).resolve().parents[2]
        self.sweep_file.write_text(
            f"""# The fault test's sweep: {self.args.runs} seeds of {self.args.config}.
name = "fault"
configs = ["{repo / 'configs' / (self.args.config + '.toml')}"]
seeds = {{ from = 0, count = {self.args.runs} }}
{f"group_seeds = {self.args.group_seeds}" if self.args.group_seeds else ""}

[set]
"train.steps" = {self.args.steps}
"train.eval_every" = 50
"train.eval_size" = 64
"train.checkpoint_every" = 20
"train.snapshot_every" = 20
"train.target_accuracy" = 1.0

[inspect]
probe = {probe}
"""
        )

    def runner(self, ulimit_blocks=None):
        """Starts `sweep run` in its own session, so that a fault reaches only it."""
        command = [str(self.bin / "headlab"), "sweep", "run", str(self.sweep_file), "--out",
                   str(self.work), "--workers", str(self.args.workers), "--quiet"]
        if ulimit_blocks is not None:
            # SIGXFSZ ignored (inherited through exec): writes past the limit fail with
            # EFBIG instead of killing the writer.
            command = ["bash", "-c", f"trap '' XFSZ; ulimit -f {ulimit_blocks}; exec \"$@\"",
                       "runner"] + command
        return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)

    def wait_runner(self, runner, what="sweep run"):
        """Waits for a runner; one still running after the timeout is hung: it and its
        children (its session) are killed and it is reported. Returns whether it ended by
        itself."""
        try:
            runner.wait(timeout=self.runner_timeout)
            return True
        except subprocess.TimeoutExpired:
            self.hung.append((self.round, self.last_kind,
                              f"{what} still running after {self.runner_timeout:.0f} s"))
            self.log(f"{what} hung: killed after {self.runner_timeout:.0f} s")
            try:
                os.killpg(runner.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            runner.wait()
            return False

    def command(self, command, timeout=None):
        """Runs a command in its own session to its end: (exit status, its output), the
        status None when it outlived the timeout (it and its children were killed)."""
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True, start_new_session=True)
        try:
            output, _ = process.communicate(timeout=timeout or self.runner_timeout)
            return process.returncode, output
        except subprocess.TimeoutExpired:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            output, _ = process.communicate()
            self.hung.append((self.round, self.last_kind,
                              f"{shlex.join(command[1:4])} ... killed after "
                              f"{timeout or self.runner_timeout:.0f} s"))
            return None, output

    def log(self, line):
        """One line of OUT/faults.log (printed too with --verbose)."""
        line = f"round {self.round}: {line}"
        with open(self.faults_log, "a") as log:
            log.write(line + "\n")
        if self.args.verbose:
            print(f"fault test: {line}", flush=True)

    def group_of(self, name):
        """The runs that train together with `name` (itself alone without --group-seeds):
        the sweep groups one grid point's seeds, in order, `group_seeds` at a time."""
        names = self.run_names()
        size = self.args.group_seeds
        if size <= 1 or name not in names:
            return [name]
        start = names.index(name) // size * size
        return names[start:start + size]

    def run_names(self):
        return [f"{self.args.config}-s{seed}" for seed in range(self.args.runs)]

    def done(self):
        """Every run trained and inspected: both manifests, each written last, are there."""
        return all((self.work / name / "inspect" / "manifest.json").is_file()
                   and (self.work / name / "manifest.json").is_file()
                   for name in self.run_names())

    # ---------------------------------------------------------------- watching
    def newest_checkpoint(self, name):
        checkpoints = self.work / name / "checkpoints"
        try:
            steps = [int(p.name[len("step-"):]) for p in checkpoints.iterdir()
                     if p.name.startswith("step-") and (p / "state.json").is_file()]
        except (FileNotFoundError, ValueError):
            return None
        return max(steps, default=None)

    def watch(self, stop):
        """Until `stop` is set: a run whose newest checkpoint goes back (or away) after one
        existed was redone from an earlier step; a failure record that blames a lock is
        spurious."""
        best = {}
        while not stop.is_set():
            # Checkpoints the test deleted itself (weights-flip-no-checkpoints): a run trained
            # again from step 0 after that is no loss.
            for name in list(self.watch_reset):
                best.pop(name, None)
                self.watch_reset.discard(name)
            for name in self.run_names():
                step = self.newest_checkpoint(name)
                seen = best.get(name)
                if seen is not None and (step is None or step < seen):
                    if not (self.work / name / "model.safetensors").is_file() \
                            and (self.round, name) not in self.deleted_checkpoints:
                        self.redone.add((self.round, name))
                if step is not None:
                    best[name] = max(step, seen or 0)
            failed = self.work / "_sweep" / "failed"
            if failed.is_dir():
                for record in failed.iterdir():
                    try:
                        text = record.read_text()
                    except OSError:
                        continue
                    if "in use by" in text or "another sweep runner" in text:
                        self.spurious.add((self.round, record.stem, text.splitlines()[0]))
            time.sleep(0.02)

    # ---------------------------------------------------------------- processes
    def ancestors(self):
        """This process and the ones that started it (`timeout`, a shell): they name the
        test's directory too, and are not left over."""
        pids, pid = set(), os.getpid()
        while pid > 1 and pid not in pids:
            pids.add(pid)
            try:
                stat = (Path("/proc") / str(pid) / "stat").read_text()
                pid = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                break
        return pids

    def processes_of_test(self):
        """Pids of every live process whose command line names the test's directory."""
        found = []
        needle = str(self.out).encode()
        mine = self.ancestors()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) in mine:
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes()
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if needle in cmdline and state != "Z":
                found.append(int(entry.name))
        return found

    def children_of(self, pid):
        """`headlab train` and `headlab inspect` processes whose parent is `pid`."""
        children = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                comm = stat[stat.index("(") + 1:stat.rindex(")")]
                parent = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError):
                continue
            if parent == pid and comm == "headlab":
                children.append(int(entry.name))
        return children

    def command_line(self, pid):
        """A process's command line, shortened to its command and run directory."""
        try:
            words = (Path("/proc") / str(pid) / "cmdline").read_bytes().split(b"\0")
        except OSError:
            return f"process {pid}"
        words = [w.decode(errors="replace") for w in words if w]
        runs = [w[len(str(self.work)) + 1:] for w in words if w.startswith(str(self.work) + "/")]
        return " ".join(["headlab"] + words[1:2] + runs[:1])

    def wait_all_gone(self, seconds=3.0):
        """Waits for every process of the test to end; counts and kills those left. Once its
        runner has died, a `train` gets one SIGTERM and stops after its current step with a
        checkpoint, well within the 3 s; an orphan that trains on (a run takes longer) is
        still there."""
        deadline = time.time() + seconds
        while time.time() < deadline:
            if not self.processes_of_test():
                return
            time.sleep(0.05)
        left = self.processes_of_test()
        self.left_running += len(left)
        for pid in left:
            try:
                command = (Path("/proc") / str(pid) / "cmdline").read_bytes()
                command = command.replace(b"\0", b" ").decode(errors="replace").strip()
            except OSError:
                command = "?"
            self.left_commands.append((self.round, self.last_kind, command))
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.5)

    # ---------------------------------------------------------------- one attempt
    def attempt(self, kind):
        """Starts a runner, injects `kind` (None: no fault) at a random moment, and waits
        until every process of the test has ended. Returns whether the fault was injected."""
        self.last_kind = kind
        # Whether a runner ran to its own end untouched by a fault (it tried every run that
        # needed work, and nothing but the run's own state can have failed it).
        self.whole = False
        if kind in BESIDE_KINDS:
            return self.attempt_beside(kind)
        runner = self.runner(EFBIG_BLOCKS if kind == "efbig" else None)
        if kind in (None, "efbig"):
            if self.wait_runner(runner):
                self.whole = kind is None
                self.pending = False  # a whole runner started after every earlier fault
            if kind == "efbig":
                self.log(f"efbig: sweep run under ulimit -f {EFBIG_BLOCKS}, exit "
                         f"{runner.returncode}")
            self.wait_all_gone()
            return kind == "efbig"
        # Somewhere in the first 60% of the time a whole sweep takes (a runner started
        # after a fault has less left to do): training, checkpoints, inspection.
        delay = self.rng.uniform(0.02, 0.6 * self.reference_seconds)
        time.sleep(delay)
        injected = runner.poll() is None
        stopped = False
        what = "not injected, the runner had ended"
        if injected:
            if kind == "runner-kill9":
                os.kill(runner.pid, signal.SIGKILL)
                stopped = True
                what = "kill -9 of sweep run"
            elif kind == "sigterm":
                os.kill(runner.pid, signal.SIGTERM)
                stopped = True
                what = "SIGTERM to sweep run"
            elif kind == "child-kill9":
                children = self.children_of(runner.pid)
                if children:
                    victim = self.rng.choice(children)
                    what = f"kill -9 of {self.command_line(victim)}"
                    os.kill(victim, signal.SIGKILL)
                else:
                    injected = False
                    what = "not injected, sweep run had no child"
            elif kind == "second-runner":
                second = self.runner()
                self.wait_runner(second, "the second sweep run")
                what = f"a second sweep run beside it, exit {second.returncode}"
        self.log(f"{kind}: {what}, {delay:.1f} s after the runner started")
        if self.wait_runner(runner) and not stopped:
            self.pending = False
        self.wait_all_gone()
        return injected

    def attempt_beside(self, kind):
        """A fault of BESIDE_KINDS: injected before a runner starts (between two runners) or
        at a random moment while it runs; then the runner runs to its end. A fault injected
        while it ran leaves `pending` set: the runner may have looked at the run before."""
        self.beside = True
        if kind == "inspect-options" and self.rng.random() < 0.5:
            return self.attempt_other_probe()
        # A run not started yet is there mostly before a round's first runner: a kill there
        # is always between runners.
        fresh_round = kind == "early-train-kill" and not self.work.exists()
        if fresh_round or self.rng.random() < 0.5:
            if self.inject(kind, "between runners", log_miss=False):
                runner = self.runner()
                if self.wait_runner(runner):
                    self.whole = True
                    self.pending = False
                self.wait_all_gone()
                return True
            # Nothing it applies to yet (a round's start, most often): while the runner
            # runs instead.
        runner = self.runner()
        time.sleep(self.rng.uniform(0.02, 0.6 * self.reference_seconds))
        # From that moment on, as soon as a run is in a state the fault applies to (a run
        # with final weights, a report, a run not started yet), or after the runner ended.
        while True:
            running = runner.poll() is None
            when = "while sweep run ran" if running else "after sweep run ended"
            injected = self.inject(kind, when, log_miss=not running)
            if injected or not running:
                break
            time.sleep(0.01)
        ended = self.wait_runner(runner)
        self.whole = ended and not injected
        if injected:
            self.pending = True
        elif ended:
            self.pending = False
        self.wait_all_gone()
        return injected

    def attempt_other_probe(self):
        """inspect-options, the sweep file's way: one `sweep run` with another `[inspect]
        probe`, the file written back as it was after it; the next runner must measure again
        every report that one wrote."""
        probe = self.rng.choice(OTHER_PROBES)
        before = self.inspects_with_probe(probe)
        self.write_sweep(probe)
        try:
            runner = self.runner()
            self.wait_runner(runner)
        finally:
            self.write_sweep()
        self.wait_all_gone()
        after = self.inspects_with_probe(probe)
        measured = [name for name in self.run_names() if after[name] > before[name]]
        self.log(f"inspect-options (one runner): sweep run with [inspect] probe = {probe}, "
                 f"then {SWEEP_PROBE} again; it inspected: {', '.join(measured) or 'none'}")
        for name in measured:
            self.touch(name, f"inspect-options (one sweep run with probe = {probe})")
        self.pending = True
        return True

    def inspects_with_probe(self, probe):
        """Per run: the `inspect` commands with `--probe PROBE` its sweep log holds."""
        counts = {}
        for name in self.run_names():
            try:
                log = (self.work / "_sweep" / "logs" / f"{name}.log").read_text(errors="replace")
            except OSError:
                log = ""
            counts[name] = sum(1 for line in log.splitlines() if line.startswith("$ ")
                               and '"inspect"' in line and f'"--probe" "{probe}"' in line)
        return counts

    def touch(self, name, what):
        self.touched.setdefault((self.round, name), []).append(what)

    # ---------------------------------------------------------------- faults beside the sweep
    def inject(self, kind, when, log_miss=True):
        """Injects one fault of BESIDE_KINDS now; logs what it did. Returns whether it was
        injected (False when no run is in a state it applies to)."""
        inject = {"weights-flip": self.weights_flip,
                  "weights-flip-no-checkpoints": lambda: self.weights_flip(True),
                  "report-flip": self.report_flip,
                  "foreign-report": self.foreign_report,
                  "inspect-options": self.inspect_other_probe,
                  "early-train-kill": self.early_train_kill,
                  "concurrent-inspect": self.concurrent_inspect,
                  "foreign-out": self.foreign_out}[kind]
        done = inject()
        if done is None:
            if log_miss:
                self.log(f"{kind} ({when}): not injected, no run it applies to")
            return False
        name, what = done
        names = name if isinstance(name, list) else [name]  # a group's train names several
        self.log(f"{kind} ({when}): {', '.join(names)}: {what}")
        for name in names:
            self.touch(name, f"{kind} ({when})")
        if kind in SAME_SIZE_KINDS:
            self.unverified = True
        return True

    def weights_flip(self, no_checkpoints=False):
        """The sign of every third float of one run's final weights, in place: same size,
        same mtime. A run whose report is not finished is drawn first (3 times in 4): the
        sweep then measures damaged weights. With `no_checkpoints` its checkpoints are
        deleted too, as to save space: then no checkpoint writes the weights again."""
        trained = [n for n in self.run_names() if (self.work / n / "model.safetensors").is_file()]
        unfinished = [n for n in trained
                      if not (self.work / n / "inspect" / "manifest.json").is_file()]
        if not trained:
            return None
        name = self.rng.choice(unfinished if unfinished and self.rng.random() < 0.75
                               else trained)
        run = self.work / name
        report = ("report finished" if (run / "inspect" / "manifest.json").is_file()
                  else "report unfinished")
        sealed = "run sealed" if (run / "manifest.json").is_file() else "run not sealed"
        try:
            flipped = flip_floats(run / "model.safetensors")
        except (OSError, ValueError):  # gone or being replaced: not injected (this time)
            return None
        what = f"model.safetensors: {flipped} floats' signs flipped ({sealed}, {report})"
        if no_checkpoints and (run / "checkpoints").is_dir():
            # Marked before the deletion: the watcher must never take the retraining from
            # step 0 that follows (this round) for a lost checkpoint, its seed group's
            # included (a group trains again from the start together).
            for mate in self.group_of(name):
                self.deleted_checkpoints.add((self.round, mate))
            shutil.rmtree(run / "checkpoints", ignore_errors=True)
            self.watch_reset.add(name)
            what += "; checkpoints/ deleted"
        return name, what

    def report_flip(self):
        """One file of a finished or unfinished report changed in place, same size."""
        reports = {}
        for name in self.run_names():
            # Not a temporary of an `inspect` writing now (.NAME.tmp-PID): a report's file.
            try:
                files = sorted(p for p in (self.work / name / "inspect").rglob("*")
                               if p.is_file() and not p.name.startswith("."))
            except OSError:  # a directory renamed away while listed: not this time
                files = []
            if files:
                reports[name] = files
        if not reports:
            return None
        name = self.rng.choice(sorted(reports))
        path = self.rng.choice(reports[name])
        state = ("finished" if (self.work / name / "inspect" / "manifest.json").is_file()
                 else "unfinished")
        try:
            how = damage_same_size(path, self.rng)
        except (OSError, ValueError):  # gone or being replaced: not injected (this time)
            return None
        return name, f"{path.relative_to(self.work / name)} of the {state} report: {how}"

    def hand_inspect(self, run, *options):
        """`headlab inspect RUN OPTIONS...` as a user types it: (exit status, first line of
        its error or last line of its output)."""
        command = [str(self.bin / "headlab"), "inspect", str(run), *options]
        status, output = self.command(command, timeout=self.runner_timeout)
        lines = [line for line in output.splitlines() if line.strip()]
        errors = [line for line in lines if line.lower().startswith(("error", "headlab:"))]
        said = (errors or lines[-1:] or [""])[0][:200]
        return status, said

    def foreign_report(self):
        """`headlab inspect RUN_j --out RUN_i/inspect` with the sweep's options: another
        run's report written into this run's report directory. A binary that refuses it
        exits non-zero; either way the sweep must end with RUN_i's own report."""
        runs = [n for n in self.run_names() if (self.work / n / "run.json").is_file()]
        trained = [n for n in self.run_names() if (self.work / n / "model.safetensors").is_file()]
        pairs = [(i, j) for i in runs for j in trained if i != j]
        if not pairs:
            return None
        into, source = self.rng.choice(pairs)
        status, said = self.hand_inspect(self.work / source, "--out",
                                         str(self.work / into / "inspect"),
                                         "--probe", str(SWEEP_PROBE))
        verdict = ("accepted (exit 0)" if status == 0 else
                   "timed out" if status is None else f"refused (exit {status}): {said}")
        return into, f"headlab inspect {source} --out {into}/inspect: {verdict}"

    def inspect_other_probe(self):
        """`headlab inspect RUN --probe P` by hand, P not the sweep's, into the run's own
        report."""
        trained = [n for n in self.run_names() if (self.work / n / "model.safetensors").is_file()]
        if not trained:
            return None
        name = self.rng.choice(trained)
        probe = self.rng.choice(OTHER_PROBES)
        status, said = self.hand_inspect(self.work / name, "--probe", str(probe))
        verdict = ("exit 0" if status == 0 else "timed out" if status is None
                   else f"exit {status}: {said}")
        return name, f"headlab inspect {name} --probe {probe}: {verdict}"

    def concurrent_inspect(self):
        """Two `headlab inspect RUN` at once into the run's own report directory (the sweep's
        probe and another): each either writes the report or is refused as held (exit 75);
        a report sealed after both is one reading, which `headlab verify` (run under the
        report's lock, as a reader) confirms. The sweep must still end with its own report."""
        sealed = [n for n in self.run_names() if (self.work / n / "manifest.json").is_file()]
        if not sealed:
            return None
        name = self.rng.choice(sealed)
        run = self.work / name
        probes = [SWEEP_PROBE, self.rng.choice(OTHER_PROBES)]
        processes = [subprocess.Popen(
            [str(self.bin / "headlab"), "inspect", str(run), "--probe", str(probe), "--quiet"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            start_new_session=True) for probe in probes]
        ends = []
        for process in processes:
            try:
                _, err = process.communicate(timeout=self.runner_timeout)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                _, err = process.communicate()
                self.hung.append((self.round, "concurrent-inspect",
                                  f"inspect {name} killed after {self.runner_timeout:.0f} s"))
            said = next((line for line in err.splitlines() if line.startswith("error")), "")
            ends.append((process.returncode, said))
        for status, said in ends:
            # Exit 0, or refused as held; the run itself may be taken by the sweep meanwhile
            # (damaged, repaired): then refused as that. Never another failure.
            if status not in (0, 75) and "damaged" not in said and "unfinished" not in said:
                self.mixed.append((self.round, name, f"an inspect ended {status}: {said}"))
        verdict = self.verify_report(run / "inspect")
        if verdict:
            self.mixed.append((self.round, name, verdict))
        exits = ", ".join(f"probe {p}: exit {s}" for p, (s, _) in zip(probes, ends))
        return name, f"two inspects at once ({exits}); report: {verdict or 'one reading'}"

    def verify_report(self, report):
        """Why the sealed report at `report` is not intact (`headlab verify`, waiting while a
        writer holds it); None when it is, or is not sealed."""
        deadline = time.monotonic() + self.runner_timeout
        while time.monotonic() < deadline:
            if not (report / "manifest.json").is_file():
                return None
            status, output = self.command([str(self.bin / "headlab"), "verify", str(report)])
            if status == 0:
                return None
            if status != 75:  # 75: a writer holds it (the sweep's inspect): wait for it
                return f"verify exit {status}: {output.strip().splitlines()[-1:]}"
            time.sleep(0.05)
        return "still held after the timeout"

    def foreign_out(self):
        """`inspect RUN --out DIR` and `compare RUN_i RUN_j --out DIR` into a user's directory
        of files with a report's and a comparison's names: both refused, nothing there
        changed."""
        trained = [n for n in self.run_names() if (self.work / n / "manifest.json").is_file()]
        if not trained:
            return None
        users = self.out / f"users-{self.round}-{self.rng.randrange(1 << 30)}"
        files = {"index.html": b"<p>mine</p>", "summary.json": b'{"mine": true}',
                 "figures/attention.svg": b"<svg/>", "compare.html": b"<p>my comparison</p>",
                 "matching.json": b"[]"}
        for relative, data in files.items():
            (users / relative).parent.mkdir(parents=True, exist_ok=True)
            (users / relative).write_bytes(data)
        name = self.rng.choice(trained)
        other = self.rng.choice(trained)
        commands = [["inspect", str(self.work / name), "--out", str(users), "--quiet"],
                    ["compare", str(self.work / name), str(self.work / other), "--out",
                     str(users), "--quiet"]]
        verdicts = []
        for words in commands:
            status, output = self.command([str(self.bin / "headlab"), *words])
            verdicts.append(f"{words[0]} exit {status}")
            if status == 0:
                self.trampled.append((self.round, " ".join(words[:2]), "accepted (exit 0)"))
        now = {str(p.relative_to(users)): p.read_bytes()
               for p in users.rglob("*") if p.is_file()}
        if now != {k: v for k, v in files.items()}:
            changed = sorted(set(now) ^ set(files)) + sorted(
                k for k in files if k in now and now[k] != files[k])
            self.trampled.append((self.round, "inspect/compare --out",
                                  f"the user's directory changed: {', '.join(changed)}"))
        shutil.rmtree(users, ignore_errors=True)
        return name, f"--out a user's directory: {', '.join(verdicts)}"

    def early_train_kill(self):
        """kill -9 of `headlab train` of a run whose directory does not exist yet, within its
        first 30 ms, with the command the sweep gives it (every run directory the command
        names must not exist: a group's command replaces the others with --force)."""
        fresh = [n for n in self.run_names() if n in self.train_commands
                 and not any(Path(d).exists() for d in out_dirs(self.train_commands[n]))]
        if not fresh:
            return None
        name = self.rng.choice(fresh)
        command = self.train_commands[name]
        # A group's command makes every run of the group (the first one first).
        runs = [Path(d) for d in out_dirs(command)]
        stage = self.rng.choice(EARLY_KILL_STAGES)
        limit = self.rng.uniform(0.0, 0.03) if stage == "timed" else 0.03
        started = time.monotonic()
        train = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                 start_new_session=True)
        while time.monotonic() - started < limit:
            if stage != "timed":
                if any(entry.startswith(stage) for run in runs if run.is_dir()
                       for entry in os.listdir(run)):
                    break
            else:
                time.sleep(0.0005)
        elapsed = (time.monotonic() - started) * 1000
        try:
            os.killpg(train.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        train.wait()
        left = "; ".join((f"{run.name}: " if len(runs) > 1 else "")
                         + (", ".join(sorted(os.listdir(run))) or "an empty directory")
                         for run in runs if run.is_dir()) or "no run directory"
        moment = "at random" if stage == "timed" else f"as {stage} appeared"
        what = (f"train killed {elapsed:.1f} ms after its start ({moment}; exit "
                f"{train.returncode}): left {left}")
        return ([run.name for run in runs] if len(runs) > 1 else name), what

    # ---------------------------------------------------------------- Slurm
    def submit(self):
        """`sweep submit --slurm`: the job id, or None when nothing was left to submit."""
        output = subprocess.run(
            [str(self.bin / "headlab"), "sweep", "submit", str(self.sweep_file), "--slurm", "--out",
             str(self.work), "--max-parallel", str(self.args.workers), "--cpus-per-task", "1",
             "--time", "10"], capture_output=True, text=True)
        if output.returncode != 0:
            sys.exit(f"fault test: sweep submit failed:\n{output.stdout}{output.stderr}")
        # "submitted job 12: 4 runs of fault (array 0-3), output in ..."
        words = output.stdout.split()
        if "job" not in words:
            return None
        return words[words.index("job") + 1].rstrip(":")

    def job_tasks(self, job, states="R"):
        """The array tasks of `job` in `states`, as `JOB_TASK` ids."""
        output = subprocess.run(["squeue", "-h", "-r", "-j", job, "-t", states, "-o", "%i"],
                                capture_output=True, text=True)
        return output.stdout.split()

    def wait_job(self, job, seconds=300):
        deadline = time.time() + seconds
        # Not "all": squeue lists finished tasks for a while (MinJobAge) as CD or F.
        while self.job_tasks(job, "PD,CF,R,CG,S"):
            if time.time() > deadline:
                subprocess.run(["scancel", job])
                sys.exit(f"fault test: job {job} still queued after {seconds} s")
            time.sleep(0.2)

    def task_processes(self):
        """Pids of the running `sweep task` processes of this test."""
        found = []
        needle = str(self.sweep_file).encode()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"sweep" in cmdline and b"task" in cmdline and needle in cmdline:
                found.append(int(entry.name))
        return found

    def slurm_attempt(self, kind):
        """Submits what is left, injects `kind` once a task runs, waits for the job."""
        self.last_kind = kind
        self.whole = False  # (not told apart here: no failure record counts as stuck)
        job = self.submit()
        if job is None:
            return False
        if kind is None:
            self.wait_job(job)
            self.wait_all_gone()
            return False
        deadline = time.time() + 60
        while not self.job_tasks(job) and time.time() < deadline:
            time.sleep(0.1)
        time.sleep(self.rng.uniform(0.02, self.reference_seconds / 2))
        injected = False
        if kind == "scancel":
            tasks = self.job_tasks(job)
            if tasks:
                subprocess.run(["scancel", self.rng.choice(tasks)])
                injected = True
        else:
            tasks = self.task_processes()
            victims = tasks if kind == "task-kill9" else [
                c for t in tasks for c in self.children_of(t)]
            if victims:
                try:
                    os.kill(self.rng.choice(victims), signal.SIGKILL)
                    injected = True
                except ProcessLookupError:
                    pass
        self.wait_job(job)
        self.wait_all_gone()
        return injected

    def run_round(self, faults_left):
        """A sweep from scratch, with faults until it is done or none are left. Done: every
        run's manifests are there, a runner started after the last fault beside the sweep
        has run to its end, and `sweep verify` passes after same-size damage. Stuck: the
        same failure record after STUCK_AFTER runners untouched by a fault, or not done after
        STUCK_AFTER runners in a row without a fault: reported, and left as it is."""
        if self.work.exists():
            shutil.rmtree(self.work)
        FLIPS.clear()  # the files of the last round are gone
        stop = threading.Event()
        watcher = threading.Thread(target=self.watch, args=(stop,))
        watcher.start()
        injected = 0
        tries = 0
        self.whole = False
        idle = 0  # runners in a row without a fault
        # Failure record -> whole runners in a row (untouched by a fault) that left it as it
        # was: the sweep tried the run again and failed the same way.
        kept = {}
        self.pending = self.unverified = self.beside = False
        stuck = None
        while True:
            if self.done() and not self.pending and self.sweep_agrees():
                break
            if self.whole:
                records = self.failure_records()
                kept = {record: kept.get(record, 0) + 1 for record in records}
            same = [f"{name}: {line}" for (name, line), n in kept.items() if n >= STUCK_AFTER]
            if idle >= STUCK_AFTER or tries >= 400 or same:
                stuck = (f"the same failure after {STUCK_AFTER} whole runners ({same[0][:200]})"
                         if same else
                         f"not done after {idle} runners without a fault" if idle >= STUCK_AFTER
                         else "not done after 400 runners")
                break
            tries += 1
            kind = self.rng.choice(self.kinds) if injected < faults_left else None
            attempt = self.slurm_attempt if self.args.slurm else self.attempt
            if attempt(kind):
                self.injected[kind] += 1
                injected += 1
                idle = 0
            else:
                idle += 1
        stop.set()
        watcher.join()
        if stuck:
            self.stuck.append((self.round, stuck, self.sweep_status()))
            self.log(f"stuck: {stuck}")
        # A failure record left beside a done run is spurious (in a stuck round the records
        # are the runs' own, listed with it).
        failed = self.work / "_sweep" / "failed"
        if failed.is_dir() and not stuck:
            for record in failed.iterdir():
                self.spurious.add((self.round, record.stem, "left after the run was done"))
        # Temporary files left in a run directory (not compared: noted).
        for name in self.run_names():
            run = self.work / name
            if run.is_dir():
                self.temporaries += [(self.round, f"{name}/{entry}") for entry in
                                     sorted(os.listdir(run)) if ".tmp" in entry
                                     or ".old-" in entry]
        return injected

    def sweep_agrees(self):
        """Once every run has its manifests: after same-size damage, `sweep verify` passes
        (what a user runs to find a changed byte: `sweep run` compares sizes only; damage it
        finds is recorded in _sweep/damaged/, for the next runner to repair, and verified
        again after); after any fault beside the sweep, `sweep status` counts every run as
        done (not failed: `verify` reads only the runs it counts as done)."""
        if self.unverified:
            status, output = self.command([str(self.bin / "headlab"), "sweep", "verify",
                                           str(self.sweep_file), "--out", str(self.work)])
            if status != 0:
                self.log("sweep verify: " + " | ".join(output.strip().splitlines()[-3:]))
                return False
            self.unverified = False
        if self.beside:
            status, output = self.command([str(self.bin / "headlab"), "sweep", "status",
                                           str(self.sweep_file), "--out", str(self.work)], 60)
            summary = re.search(r"(\d+) runs: (\d+) done", output)
            if not summary or summary.group(1) != summary.group(2):
                self.log("sweep status: " + " | ".join(output.strip().splitlines()[-3:]))
                return False
        return True

    def failure_records(self):
        """(run, first line) of each failure record of the sweep."""
        records = set()
        failed = self.work / "_sweep" / "failed"
        if failed.is_dir():
            for record in failed.iterdir():
                try:
                    first = record.read_text(errors="replace").splitlines()[0]
                except (OSError, IndexError):
                    continue
                records.add((record.stem, first))
        return records

    def run_done(self, name):
        return ((self.work / name / "inspect" / "manifest.json").is_file()
                and (self.work / name / "manifest.json").is_file())

    def sweep_status(self):
        """`sweep status`, and the first line of each failure record: why a stuck round is
        stuck."""
        status, output = self.command([str(self.bin / "headlab"), "sweep", "status",
                                       str(self.sweep_file), "--out", str(self.work)], 60)
        lines = [line for line in output.splitlines() if line.strip()][-12:]
        failed = self.work / "_sweep" / "failed"
        if failed.is_dir():
            for record in sorted(failed.iterdir()):
                try:
                    first = record.read_text(errors="replace").splitlines()[0]
                except (OSError, IndexError):
                    first = "?"
                lines.append(f"failure record {record.name}: {first[:300]}")
        return lines

    # ---------------------------------------------------------------- comparing
    def fingerprint(self, run_dir):
        """Every file of a run that must equal the reference: final weights, metrics (timing
        fields out), snapshots and the report; safetensors headers with sorted keys (Burn
        writes a map in random order)."""
        files = {}
        paths = [run_dir / "model.safetensors", run_dir / "metrics.jsonl", run_dir / "config.toml"]
        paths += sorted((run_dir / "snapshots").glob("*.safetensors"))
        # The report's manifest holds hashes of these files: equal when they are, and
        # checked by `sweep verify` in the corruption phase.
        paths += sorted(p for p in (run_dir / "inspect").rglob("*")
                        if p.is_file() and p.name != "manifest.json")
        for path in paths:
            key = str(path.relative_to(run_dir))
            if not path.is_file():
                files[key] = None
                continue
            data = path.read_bytes()
            if path.suffix == ".safetensors":
                n = int.from_bytes(data[:8], "little")
                header = json.dumps(json.loads(data[8:8 + n]), sort_keys=True)
                data = header.encode() + data[8 + n:]
            elif path.name == "metrics.jsonl":
                records = [json.loads(line) for line in data.decode().splitlines()]
                data = json.dumps([{k: v for k, v in r.items() if k not in TIMING_FIELDS}
                                   for r in records]).encode()
            files[key] = data
        return files

    def compare_round(self, reference):
        for name in self.run_names():
            got = self.fingerprint(self.work / name)
            want = reference[name]
            differ = sorted((k for k in set(got) | set(want) if got.get(k) != want.get(k)),
                            key=telling_first)
            self.compared.append((self.round, name, not differ, ", ".join(differ[:6])
                                  + (f" and {len(differ) - 6} more" if len(differ) > 6 else "")))
            if differ:
                lines = []
                for key in differ[:6]:
                    line = explain(key, self.work / name / key,
                                   self.out / "reference" / name / key)
                    # Another run's file (a report written over this one's): say whose.
                    whose = [other for other in self.run_names() if other != name
                             and got.get(key) is not None and reference[other].get(key) == got[key]]
                    if whose:
                        line += f"; equal to {whose[0]}'s in the reference"
                    lines.append(line)
                self.explained[(self.round, name)] = lines
                # Kept for a look: OUT/differ/round-N/NAME, with the reference beside it.
                kept = self.out / "differ" / f"round-{self.round}"
                kept.mkdir(parents=True, exist_ok=True)
                # (A stuck round may have no run directory, or no _sweep/, to keep.)
                for part in (name, "_sweep"):
                    if (self.work / part).is_dir():
                        shutil.copytree(self.work / part, kept / part, symlinks=True,
                                        dirs_exist_ok=True)

    def sweep_report(self):
        """`sweep report`'s report.json with its timing numbers left out, or None (with the
        command's output) when it failed."""
        status, output = self.command([str(self.bin / "headlab"), "sweep", "report",
                                       str(self.sweep_file), "--out", str(self.work)])
        try:
            report = json.loads((self.work / "_sweep" / "report" / "report.json").read_text())
        except (OSError, ValueError):
            return None, output
        return (without(report, REPORT_TIMING_FIELDS), output) if status == 0 else (None, output)

    def compare_report(self, reference_report):
        """The sweep's report (`sweep report`) against the reference's: every run done, and
        every number and estimate the same."""
        report, output = self.sweep_report()
        if report is None:
            why = "sweep report failed: " + " | ".join(output.strip().splitlines()[-3:])
        else:
            # The runs first (a run's state or number), then the estimates made of them.
            difference = (first_difference(report.get("runs"), reference_report.get("runs"),
                                           ".runs")
                          or first_difference(report, reference_report))
            why = "" if difference is None else describe_json_difference(difference)
        self.reports.append((self.round, not why, why))

    # ---------------------------------------------------------------- damaged results
    def sweep(self, *args):
        """`headlab sweep ARGS... FILE --out WORK` to its end (killed after the runner
        timeout): its exit status (None when killed) and output."""
        command = [str(self.bin / "headlab"), "sweep", *args, str(self.sweep_file), "--out",
                   str(self.work)]
        status, output = self.command(command)
        return subprocess.CompletedProcess(command, status, output, "")

    def corrupt_one(self, reference):
        """Damages one file of a finished run; checks the report leaves the run out, then
        that `sweep run` repairs it to the reference."""
        finished = [name for name in self.run_names() if self.run_done(name)]
        if not finished:
            print("fault test: no finished run left to damage", flush=True)
            return
        name = self.rng.choice(finished)
        run = self.work / name
        files = ["manifest.json", "inspect/manifest.json"]
        for part in ["", "inspect/"]:
            manifest = json.loads((run / part / "manifest.json").read_text())
            files += [part + f for f in manifest["files"]]
        target = self.rng.choice(sorted(files))
        path = run / target
        # run.json is never deleted here: without its marker a directory is not provably a
        # run, and a sweep never deletes one (it fails the run for the user to move away).
        how = self.rng.choice(["truncate", "flip"] if target == "run.json"
                              else ["truncate", "delete", "flip"])
        data = path.read_bytes()
        if how == "delete":
            path.unlink()
        elif how == "truncate":
            path.write_bytes(data[:len(data) // 2])
        else:
            flipped = bytearray(data)
            flipped[self.rng.randrange(len(flipped))] ^= 1 << self.rng.randrange(8)
            path.write_bytes(bytes(flipped))
        report = self.sweep("report")
        if report.returncode != 0:
            sys.exit(f"fault test: sweep report failed:\n{report.stdout}{report.stderr}")
        rows = json.loads((self.work / "_sweep" / "report" / "report.json").read_text())["runs"]
        counted = any(row["name"] == name and row["state"] == "done" for row in rows)
        repair = self.sweep("run", "--quiet")
        verify = self.sweep("verify")
        got = self.fingerprint(run)
        want = reference[name]
        same = (repair.returncode == 0 and verify.returncode == 0
                and all(got.get(k) == want.get(k) for k in set(got) | set(want)))
        self.corrupted.append((name, target, how, counted, same))
        if not same:
            print(f"fault test: {name}: {target} ({how}) not repaired:\n{repair.stdout}"
                  f"{repair.stderr}{verify.stdout}{verify.stderr}", flush=True)

    # ---------------------------------------------------------------- main
    def main(self):
        # Only a directory this test made (it holds the marker) is ever deleted.
        marker = self.out / ".headlab-fault-test"
        if self.out.exists() and not marker.is_file():
            sys.exit(f"fault test: {self.out} exists and is not a fault test's directory; "
                     "give another --out")
        if self.out.exists():
            shutil.rmtree(self.out)
        self.out.mkdir(parents=True)
        marker.write_text("made by scripts/check/fault_test.py; deleted by its next run\n")
        self.write_sweep()
        grouped = (f", in groups of {self.args.group_seeds}" if self.args.group_seeds
                   else "")
        print(f"fault test: reference sweep ({self.args.runs} runs of {self.args.config}, "
              f"{self.args.steps} steps{grouped})", flush=True)
        self.round = 0
        self.runner_timeout = 600  # the reference's, whatever --runner-timeout says
        started = time.time()
        if self.args.slurm:
            self.wait_job(self.submit())
        else:
            self.wait_runner(self.runner())
        if not self.done():
            sys.exit("fault test: the reference sweep did not finish; see "
                     f"{self.work / '_sweep'}")
        reference = {name: self.fingerprint(self.work / name) for name in self.run_names()}
        self.reference_seconds = time.time() - started
        self.runner_timeout = (self.args.runner_timeout
                               or max(120.0, 10 * self.reference_seconds))
        reference_report, output = self.sweep_report()
        if reference_report is None:
            sys.exit(f"fault test: sweep report of the reference failed:\n{output}")
        self.train_commands = self.read_train_commands()
        shutil.move(self.work, self.out / "reference")
        print(f"fault test: reference took {self.reference_seconds:.1f} s", flush=True)

        total = 0
        barren = 0  # rounds in a row in which no fault could be injected
        while total < self.args.faults:
            self.round += 1
            injected = self.run_round(self.args.faults - total)
            total += injected
            self.compare_round(reference)
            self.compare_report(reference_report)
            print(f"fault test: round {self.round} done, {total} of {self.args.faults} faults"
                  + (" (stuck)" if self.stuck and self.stuck[-1][0] == self.round else ""),
                  flush=True)
            barren = 0 if injected else barren + 1
            if barren == 5:
                print(f"fault test: 5 rounds in a row without a fault injected: "
                      f"{', '.join(self.kinds)} found no run to apply to; stopping at "
                      f"{total} faults", flush=True)
                break
        last_stuck = self.stuck and self.stuck[-1][0] == self.round
        if self.args.corrupt and (self.round == 0 or last_stuck):
            self.round += 1  # damage needs a finished sweep of its own
            self.run_round(0)
            self.compare_round(reference)
            self.compare_report(reference_report)
        for _ in range(self.args.corrupt):
            self.corrupt_one(reference)
        if self.args.corrupt:
            print(f"fault test: {self.args.corrupt} finished runs damaged and repaired",
                  flush=True)
        return self.report()

    def read_train_commands(self):
        """Per run: the `headlab train` command the reference sweep gave it (the first `$`
        line of its log naming train), for early-train-kill. The reference ran in the same
        directory, so the command is the one the sweep gives it now."""
        commands = {}
        for name in self.run_names():
            try:
                log = (self.work / "_sweep" / "logs" / f"{name}.log").read_text()
            except OSError:
                continue
            for line in log.splitlines():
                if line.startswith("$ "):
                    words = shlex.split(line[2:])
                    if len(words) > 1 and words[1] == "train":
                        commands[name] = words
                        break
        return commands

    def report(self):
        equal = sum(1 for _, _, same, _ in self.compared if same)
        reports_equal = sum(1 for _, same, _ in self.reports if same)
        lines = ["", "| fault | injected |", "| --- | --- |"]
        lines += [f"| {kind} | {self.injected[kind]} |" for kind in self.kinds]
        lines += [f"| all | {sum(self.injected.values())} |", "",
                  "| check | result |", "| --- | --- |",
                  f"| sweeps run from scratch | {self.round} |",
                  f"| runs equal to the reference | {equal} of {len(self.compared)} |",
                  f"| sweep reports equal to the reference's | {reports_equal} of "
                  f"{len(self.reports)} |",
                  f"| runs lost or redone from step 0 after a checkpoint | {len(self.redone)} |",
                  f"| spurious failure records | {len(self.spurious)} |",
                  f"| processes left running | {self.left_running} |",
                  f"| sweeps stuck (the same failure after {STUCK_AFTER} runners, or not done "
                  f"after {STUCK_AFTER} without a fault) | {len(self.stuck)} |",
                  f"| commands hung (killed after {self.runner_timeout:.0f} s) | "
                  f"{len(self.hung)} |",
                  f"| damaged runs counted as done by the report | "
                  f"{sum(1 for c in self.corrupted if c[3])} of {len(self.corrupted)} |",
                  f"| damaged runs repaired to the reference | "
                  f"{sum(1 for c in self.corrupted if c[4])} of {len(self.corrupted)} |",
                  f"| sealed reports not one reading, or an inspect failing beside another | "
                  f"{len(self.mixed)} |",
                  f"| users' directories written into (--out) | {len(self.trampled)} |"]
        print("\n".join(lines))
        for round_, name, same, why in self.compared:
            if not same:
                print(f"round {round_}: {name} differs from the reference: {why}")
                for line in self.explained.get((round_, name), []):
                    print(f"    {line}")
                self.print_touched(round_, name)
        for round_, same, why in self.reports:
            if not same:
                print(f"round {round_}: sweep report differs from the reference's: {why}")
        for round_, why, status in self.stuck:
            print(f"round {round_}: stuck, {why}; sweep status:")
            for line in status:
                print(f"    {line}")
        for round_, kind, what in self.hung:
            print(f"round {round_}: hung after {kind or 'no fault'}: {what}")
        for round_, name in sorted(self.redone):
            print(f"round {round_}: {name} went back to an earlier checkpoint")
            self.print_touched(round_, name)
        for round_, kind, command in self.left_commands:
            print(f"round {round_}: left running after {kind or 'no fault'}: {command}")
        for round_, name, why in sorted(self.spurious):
            print(f"round {round_}: spurious failure record for {name}: {why}")
        for name, target, how, counted, same in self.corrupted:
            if counted or not same:
                print(f"{name}: {target} ({how}): "
                      + ("counted as done by the report; " if counted else "")
                      + ("not repaired to the reference" if not same else "repaired"))
        for round_, name, why in self.mixed:
            print(f"round {round_}: {name}: concurrent inspects: {why}")
            self.print_touched(round_, name)
        for round_, command, why in self.trampled:
            print(f"round {round_}: {command} --out a user's directory: {why}")
        for round_, path in self.temporaries:
            print(f"round {round_}: note (not a failure): temporary file left: {path}")
        if self.faults_log.is_file():
            print(f"fault test: each fault and what it did: {self.faults_log}")
        ok = (equal == len(self.compared) and reports_equal == len(self.reports)
              and not self.redone and not self.spurious and self.left_running == 0
              and not self.stuck and not self.hung and not self.mixed and not self.trampled
              and all(not counted and same for _, _, _, counted, same in self.corrupted))
        print("fault test: " + ("passed" if ok else "FAILED"))
        return 0 if ok else 1

    def print_touched(self, round_, name):
        faults = self.touched.get((round_, name))
        if faults:
            print(f"    faults that named {name} in round {round_}: {'; '.join(faults)}")


# -------------------------------------------------------------------- same-size damage
# Per file: how many times flip_floats damaged it (in this test). Flipping the same floats'
# signs twice would give the file back, so the n-th flip of a file flips another third of
# them (then other sevenths): damage done twice stays damage.
FLIPS = {}


def flip_floats(path):
    """Flips the sign of every third float32 of each F32 tensor of a safetensors file, in
    place: the same size, the same mtime (damage only a hash finds). Returns how many."""
    flips = FLIPS[path] = FLIPS.get(path, -1) + 1
    every, phase = (3, flips) if flips < 3 else (7, flips % 7)
    stat = path.stat()
    data = bytearray(path.read_bytes())
    base, header = safetensors_header(data)
    flipped = 0
    for name, info in header.items():
        if name == "__metadata__" or info.get("dtype") != "F32":
            continue
        start, end = info["data_offsets"]
        # The sign bit is the top bit of a little-endian float's last byte.
        signs = slice(base + start + 4 * phase + 3, base + end, 4 * every)
        data[signs] = bytes(b ^ 0x80 for b in data[signs])
        flipped += len(range(base + start + 4 * phase + 3, base + end, 4 * every))
    write_in_place(path, data, stat)
    return flipped


def damage_same_size(path, rng):
    """Changes a file in place without changing its size (or mtime): floats' signs in a
    .safetensors, else one digit of a text file made another (JSON that still parses), else
    one byte's bit. Returns what it did."""
    if path.suffix == ".safetensors":
        return f"{flip_floats(path)} floats' signs flipped"
    stat = path.stat()
    data = bytearray(path.read_bytes())
    if not data:
        raise ValueError("empty file")
    digits = [i for i, b in enumerate(data) if 0x30 <= b <= 0x39]
    if path.suffix in (".json", ".csv", ".html", ".md", ".txt") and digits:
        at = rng.choice(digits)
        old = data[at]
        data[at] = rng.choice([d for d in b"0123456789" if d != old])
        how = f"digit {chr(old)} at byte {at} made {chr(data[at])}"
    else:
        at = rng.randrange(len(data))
        bit = rng.randrange(8)
        data[at] ^= 1 << bit
        how = f"bit {bit} of byte {at} flipped"
    write_in_place(path, data, stat)
    return how


def write_in_place(path, data, stat):
    """Overwrites a file's bytes in place (its inode kept, as a disk's damage would) and
    puts its times back."""
    with open(path, "r+b") as file:
        file.write(data)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def safetensors_header(data):
    """(offset of the data section, header) of a safetensors file's bytes."""
    if len(data) < 8:
        raise ValueError("not a safetensors file")
    n = int.from_bytes(data[:8], "little")
    return 8 + n, json.loads(bytes(data[8:8 + n]))


def out_dirs(command):
    """The run directories a `headlab train` command names (each `--out`)."""
    return [command[i + 1] for i, word in enumerate(command[:-1]) if word == "--out"]


# -------------------------------------------------------------------- explaining a difference
def telling_first(key):
    """Sort key of a run's files that differ: the run's own first (a report measured from
    other weights follows from them), then the report's files that say what it measured,
    then its numbers, its figures and pages last."""
    order = ["model.safetensors", "config.toml", "metrics.jsonl", "snapshots/",
             "inspect/provenance.json", "inspect/summary.json", "inspect/heads.json",
             "inspect/weights.safetensors", "inspect/activations.safetensors",
             "inspect/figures/", "inspect/explore.html", "inspect/index.html"]
    rank = next((i for i, prefix in enumerate(order) if key.startswith(prefix)), None)
    if rank is None:  # another report file: after the telling ones, before the figures
        rank = order.index("inspect/figures/") - 0.5
    return rank, key


def without(value, keys):
    """`value` (parsed JSON) with every field named in `keys` left out, at any depth."""
    if isinstance(value, dict):
        return {k: without(v, keys) for k, v in value.items() if k not in keys}
    if isinstance(value, list):
        return [without(v, keys) for v in value]
    return value


def first_difference(got, want, path=""):
    """The first place two parsed JSON values differ: (path, got, want), or None."""
    if type(got) is not type(want):
        return path, got, want
    if isinstance(got, dict):
        for key in sorted(set(got) | set(want)):
            if key not in got or key not in want:
                return (f"{path}.{key}", got.get(key, "(absent)"), want.get(key, "(absent)"))
            found = first_difference(got[key], want[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(got, list):
        for i, (a, b) in enumerate(zip(got, want)):
            found = first_difference(a, b, f"{path}[{i}]")
            if found:
                return found
        if len(got) != len(want):
            return f"{path} (length)", len(got), len(want)
        return None
    return None if got == want else (path, got, want)


def describe_json_difference(difference):
    path, got, want = difference
    show = lambda v: (json.dumps(v) if not isinstance(v, str) else v)[:80]
    return f"{path.lstrip('.') or '(the whole)'} is {show(got)}, the reference's {show(want)}"


def explain(key, got_path, want_path):
    """One line: how a file of a run differs from the reference's (read from both)."""
    if not want_path.is_file():
        return f"{key}: not in the reference"
    if not got_path.is_file():
        return f"{key}: missing"
    got, want = got_path.read_bytes(), want_path.read_bytes()
    try:
        if key.endswith(".safetensors"):
            return f"{key}: " + explain_tensors(got, want)
        if key.endswith("metrics.jsonl"):
            records = lambda data: [without(json.loads(line), TIMING_FIELDS)
                                    for line in data.decode().splitlines()]
            return f"{key}: " + describe_json_difference(
                first_difference(records(got), records(want)))
        if key.endswith(".json"):
            return f"{key}: " + describe_json_difference(
                first_difference(json.loads(got), json.loads(want)))
    except (ValueError, TypeError, KeyError, UnicodeDecodeError) as error:
        return f"{key}: does not parse ({str(error)[:80]}); {explain_bytes(got, want)}"
    return f"{key}: {explain_bytes(got, want)}"


def explain_tensors(got, want):
    got_base, got_header = safetensors_header(got)
    want_base, want_header = safetensors_header(want)
    names = sorted((set(got_header) | set(want_header)) - {"__metadata__"})
    differ = []
    for name in names:
        if name == "__metadata__":
            continue
        if name not in got_header or name not in want_header:
            differ.append(f"{name} ({'absent' if name not in got_header else 'extra'})")
            continue
        a, b = got_header[name], want_header[name]
        a_bytes = got[got_base + a["data_offsets"][0]:got_base + a["data_offsets"][1]]
        b_bytes = want[want_base + b["data_offsets"][0]:want_base + b["data_offsets"][1]]
        if a["shape"] != b["shape"] or a["dtype"] != b["dtype"]:
            differ.append(f"{name} (shape {a['shape']} {a['dtype']}, the reference's "
                          f"{b['shape']} {b['dtype']})")
        elif a_bytes != b_bytes:
            size = 4 if a["dtype"] in ("F32", "I32", "U32") else 1
            values = sum(1 for i in range(0, len(a_bytes), size)
                         if a_bytes[i:i + size] != b_bytes[i:i + size])
            differ.append(f"{name} ({values} of {len(a_bytes) // size} values)")
    if not differ:
        return "same tensors, other header"
    return (f"{len(differ)} of {len(names)} tensors differ: {', '.join(differ[:3])}"
            + (" ..." if len(differ) > 3 else ""))


def explain_bytes(got, want):
    if len(got) != len(want):
        return f"{len(got)} bytes, the reference's {len(want)}"
    at = next(i for i, (a, b) in enumerate(zip(got, want)) if a != b)
    return f"same size, first different byte at {at}"

if __name__ == "__main__":
    sys.exit(Test(parse_args()).main())
