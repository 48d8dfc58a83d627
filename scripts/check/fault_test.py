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

Then, in the last round's finished sweep, it damages finished runs at random (--corrupt of
them, one at a time): one file of the run or of its report, listed in their manifests (the
manifests too), cut short, deleted or with a byte flipped. After each it asserts that
`sweep report` does not count the run as done, then that `sweep run` repairs it and
`sweep verify` passes, and compares the run with the reference again.

Then it prints one table: faults injected by kind; runs whose final weights, metrics (their
wall-clock fields `tokens_per_s` and `elapsed_s` left out), snapshots and `inspect` report
equal the reference run's byte for byte; runs lost or redone from step 0 after a checkpoint
existed (watched while the sweep runs); spurious failure records (one that blames another
process's lock, or one still there when its run is done); and processes left running (a
`train`, `inspect` or `sweep` of the test still alive 3 s after its runner ended). It exits
1 unless every run equals the reference, every damaged run was kept out of the report and
repaired, and the other three counts are 0.

Standard library only.
"""

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

KINDS = ["runner-kill9", "child-kill9", "sigterm", "second-runner", "efbig"]
# With --slurm: the sweep is a job array submitted with `sweep submit --slurm`; the faults
# are the scheduler's and the runner's side of it.
#   scancel        `scancel` of one running array task (Slurm sends SIGTERM, then SIGKILL)
#   task-kill9     kill -9 of one `sweep task` process
#   child-kill9    kill -9 of the `train` or `inspect` of one task
SLURM_KINDS = ["scancel", "task-kill9", "child-kill9"]
# Metrics fields that hold wall-clock time: left out when comparing with the reference.
TIMING_FIELDS = {"tokens_per_s", "elapsed_s"}
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
    return parser.parse_args()


class Test:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.out = Path(args.out).resolve()
        self.work = self.out / "work"  # every sweep runs here, so paths in files match
        self.sweep_file = self.out / "fault.toml"
        self.bin = Path(args.bin).resolve()
        self.kinds = SLURM_KINDS if args.slurm else KINDS
        self.injected = {kind: 0 for kind in self.kinds}
        self.redone = set()
        self.spurious = set()
        self.left_running = 0
        self.left_commands = []  # (round, fault, command line) of each process left
        self.last_kind = None
        self.compared = []  # (round, run, equal, why)
        self.corrupted = []  # (run, file, how, reported as done, repaired to the reference)

    # ---------------------------------------------------------------- the sweep
    def write_sweep(self):
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
probe = 8
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
            for name in self.run_names():
                step = self.newest_checkpoint(name)
                seen = best.get(name)
                if seen is not None and (step is None or step < seen):
                    if not (self.work / name / "model.safetensors").is_file():
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
        runner = self.runner(EFBIG_BLOCKS if kind == "efbig" else None)
        if kind in (None, "efbig"):
            runner.wait()
            self.wait_all_gone()
            return kind == "efbig"
        # Somewhere in the first 60% of the time a whole sweep takes (a runner started
        # after a fault has less left to do): training, checkpoints, inspection.
        time.sleep(self.rng.uniform(0.02, 0.6 * self.reference_seconds))
        injected = runner.poll() is None
        if injected:
            if kind == "runner-kill9":
                os.kill(runner.pid, signal.SIGKILL)
            elif kind == "sigterm":
                os.kill(runner.pid, signal.SIGTERM)
            elif kind == "child-kill9":
                children = self.children_of(runner.pid)
                if children:
                    os.kill(self.rng.choice(children), signal.SIGKILL)
                else:
                    injected = False
            elif kind == "second-runner":
                second = self.runner()
                second.wait()
        runner.wait()
        self.wait_all_gone()
        return injected

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
        """A sweep from scratch, with faults until it is done or none are left."""
        if self.work.exists():
            shutil.rmtree(self.work)
        stop = threading.Event()
        watcher = threading.Thread(target=self.watch, args=(stop,))
        watcher.start()
        injected = 0
        tries = 0
        while not self.done():
            tries += 1
            if tries > 400:
                stop.set()
                watcher.join()
                sys.exit(f"fault test: round {self.round} is still not done after 400 tries")
            kind = self.rng.choice(self.kinds) if injected < faults_left else None
            attempt = self.slurm_attempt if self.args.slurm else self.attempt
            if attempt(kind):
                self.injected[kind] += 1
                injected += 1
        stop.set()
        watcher.join()
        # A failure record left beside a done run is spurious.
        failed = self.work / "_sweep" / "failed"
        if failed.is_dir():
            for record in failed.iterdir():
                self.spurious.add((self.round, record.stem, "left after the run was done"))
        return injected

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
            differ = sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))
            self.compared.append((self.round, name, not differ, ", ".join(differ[:6])))
            if differ:
                # Kept for a look: OUT/differ/round-N/NAME, with the reference beside it.
                kept = self.out / "differ" / f"round-{self.round}"
                kept.mkdir(parents=True, exist_ok=True)
                shutil.copytree(self.work / name, kept / name, symlinks=True)
                shutil.copytree(self.work / "_sweep", kept / "_sweep", symlinks=True,
                                dirs_exist_ok=True)

    # ---------------------------------------------------------------- damaged results
    def sweep(self, *args):
        command = [str(self.bin / "headlab"), "sweep", *args, str(self.sweep_file), "--out",
                   str(self.work)]
        return subprocess.run(command, capture_output=True, text=True)

    def corrupt_one(self, reference):
        """Damages one file of a finished run; checks the report leaves the run out, then
        that `sweep run` repairs it to the reference."""
        name = self.rng.choice(self.run_names())
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
        started = time.time()
        if self.args.slurm:
            self.wait_job(self.submit())
        else:
            self.runner().wait()
        if not self.done():
            sys.exit("fault test: the reference sweep did not finish; see "
                     f"{self.work / '_sweep'}")
        reference = {name: self.fingerprint(self.work / name) for name in self.run_names()}
        self.reference_seconds = time.time() - started
        shutil.move(self.work, self.out / "reference")
        print(f"fault test: reference took {self.reference_seconds:.1f} s", flush=True)

        total = 0
        while total < self.args.faults:
            self.round += 1
            total += self.run_round(self.args.faults - total)
            self.compare_round(reference)
            print(f"fault test: round {self.round} done, {total} of {self.args.faults} faults",
                  flush=True)
        if self.args.corrupt and self.round == 0:
            self.round = 1  # damage needs a finished sweep of its own
            self.run_round(0)
            self.compare_round(reference)
        for _ in range(self.args.corrupt):
            self.corrupt_one(reference)
        if self.args.corrupt:
            print(f"fault test: {self.args.corrupt} finished runs damaged and repaired",
                  flush=True)
        return self.report()

    def report(self):
        equal = sum(1 for _, _, same, _ in self.compared if same)
        lines = ["", "| fault | injected |", "| --- | --- |"]
        lines += [f"| {kind} | {self.injected[kind]} |" for kind in self.kinds]
        lines += [f"| all | {sum(self.injected.values())} |", "",
                  "| check | result |", "| --- | --- |",
                  f"| sweeps run from scratch | {self.round} |",
                  f"| runs equal to the reference | {equal} of {len(self.compared)} |",
                  f"| runs lost or redone from step 0 after a checkpoint | {len(self.redone)} |",
                  f"| spurious failure records | {len(self.spurious)} |",
                  f"| processes left running | {self.left_running} |",
                  f"| damaged runs counted as done by the report | "
                  f"{sum(1 for c in self.corrupted if c[3])} of {len(self.corrupted)} |",
                  f"| damaged runs repaired to the reference | "
                  f"{sum(1 for c in self.corrupted if c[4])} of {len(self.corrupted)} |"]
        print("\n".join(lines))
        for round_, name, same, why in self.compared:
            if not same:
                print(f"round {round_}: {name} differs from the reference: {why}")
        for round_, name in sorted(self.redone):
            print(f"round {round_}: {name} went back to an earlier checkpoint")
        for round_, kind, command in self.left_commands:
            print(f"round {round_}: left running after {kind or 'no fault'}: {command}")
        for round_, name, why in sorted(self.spurious):
            print(f"round {round_}: spurious failure record for {name}: {why}")
        for name, target, how, counted, same in self.corrupted:
            if counted or not same:
                print(f"{name}: {target} ({how}): "
                      + ("counted as done by the report; " if counted else "")
                      + ("not repaired to the reference" if not same else "repaired"))
        ok = (equal == len(self.compared) and not self.redone and not self.spurious
              and self.left_running == 0
              and all(not counted and same for _, _, _, counted, same in self.corrupted))
        print("fault test: " + ("passed" if ok else "FAILED"))
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(Test(parse_args()).main())
