"""Hostile and malformed inputs: each ends in one line naming the file, key or id, exit status 2,
no traceback, and nothing written. Grow this file with every bug of this kind.

Most cases run the CLI in this process (fast); those that need another environment run it as a
user would, in a fresh interpreter.
"""
from __future__ import annotations

import contextlib
import io
import os
import time
from pathlib import Path

import pytest

from gapfuzz.fuzzer.cli.main import main
from tests.conftest import gapfuzz

SEEDS = "seeds: [{source: timm, include: [test_resnet]}]\n"
OK = "name: h\n" + SEEDS + "backends: {targets: [inductor@cpu]}\n"


def campaign(*lines: str, name: str = "h", seeds: str = SEEDS, targets: str = "[inductor@cpu]") -> str:
    """A campaign file's text: the lines given, then what is missing of name, seeds and targets."""
    text = "".join(f"{ln}\n" for ln in lines)
    if "name:" not in text and name:
        text = f"name: {name}\n" + text
    if "seeds:" not in text:
        text += seeds
    if "backends:" not in text:
        text += f"backends: {{targets: {targets}}}\n"
    return text


# id: (files to create, argv with {d} for the folder, what the one line must say)
CASES = {
    # --- the campaign file as a file
    "missing-file": ({}, ["run", "{d}/nope.yaml", "--out", "{d}/run"], "nope.yaml: cannot read campaign file"),
    "a-folder": ({"dir.yaml/x": ""}, ["run", "{d}/dir.yaml", "--out", "{d}/run"], "dir.yaml: cannot read"),
    "binary": ({"c.yaml": b"\x89PNG\r\n\x1a\n\0\0\0"}, ["run", "{d}/c.yaml", "--out", "{d}/run"], "not a text file"),
    "not-utf8": ({"c.yaml": b"name: caf\xe9\n"}, ["run", "{d}/c.yaml", "--out", "{d}/run"], "not UTF-8"),
    "yaml-syntax": ({"c.yaml": "seeds: [\n"}, ["run", "{d}/c.yaml", "--out", "{d}/run"], "not valid YAML at line"),
    "list-key": ({"c.yaml": campaign("? [a, b]\n: 1")}, ["run", "--check", "{d}/c.yaml"],
                 "c.yaml: not valid YAML at line 2: a key is a list; a key is a single value (a name)"),
    "mapping-key": ({"c.yaml": campaign("pools: {? {cpu: 1}: {workers: 1}}")}, ["run", "--check", "{d}/c.yaml"],
                    "c.yaml: not valid YAML at line 2: a key is a mapping"),
    "a-list": ({"c.yaml": "- a\n- b\n"}, ["run", "{d}/c.yaml", "--out", "{d}/run"], "a mapping of keys, got list"),
    "duplicate-key": ({"c.yaml": campaign("name: h", "name: other")}, ["run", "{d}/c.yaml", "--out", "{d}/run"],
                      "the key 'name' is given twice"),
    "duplicate-nested-key": ({"c.yaml": campaign("variants: {per_seed: 2, per_seed: 3}")},
                             ["run", "{d}/c.yaml", "--out", "{d}/run"], "the key 'per_seed' is given twice"),
    # --- keys and values
    "unknown-key": ({"c.yaml": campaign("sedes: []")}, ["run", "{d}/c.yaml", "--out", "{d}/run"],
                    "unknown key 'sedes' at the top level (did you mean 'seeds'?)"),
    "unknown-nested-key": ({"c.yaml": campaign("pools: {cpu: {wokers: 2}}")},
                           ["run", "{d}/c.yaml", "--out", "{d}/run"], "unknown key 'wokers' at pools.cpu"),
    "wrong-type": ({"c.yaml": campaign("variants: {per_seed: three}")}, ["run", "{d}/c.yaml", "--out", "{d}/run"],
                   "variants.per_seed"),
    "zero-variants": ({"c.yaml": campaign("variants: {per_seed: 0}")}, ["run", "{d}/c.yaml", "--out", "{d}/run"],
                      "variants.per_seed"),
    "nan-timeout": ({"c.yaml": campaign("run: {timeout_s: .nan}")}, ["run", "{d}/c.yaml", "--out", "{d}/run"],
                    "run.timeout_s: a finite number"),
    "inf-timeout": ({"c.yaml": campaign("capture: {timeout_s: .inf}")}, ["run", "{d}/c.yaml", "--out", "{d}/run"],
                    "capture.timeout_s: a finite number"),
    "nan-multiplier": ({"c.yaml": campaign("compare: {multiplier: .nan}")},
                       ["run", "{d}/c.yaml", "--out", "{d}/run"], "compare.multiplier: a finite number"),
    "inf-tolerance": ({"c.yaml": campaign("compare: {tolerances: {float32: [.inf, 1e-5]}}")},
                      ["run", "{d}/c.yaml", "--out", "{d}/run"], "compare.tolerances.float32[0]: a finite number"),
    "tolerance-dtype-typo": ({"c.yaml": campaign("compare: {tolerances: {flaot32: [1e-5, 1e-5]}}")},
                             ["run", "{d}/c.yaml", "--out", "{d}/run"], "unknown dtype 'flaot32' (did you mean "
                                                                        "'float32'?)"),
    "inductor-option-typo": ({"c.yaml": campaign(targets="[{backend: inductor@cpu, options: {freezng: true}}]")},
                             ["run", "{d}/c.yaml", "--out", "{d}/run"],
                             "backends.targets[0].options: inductor has no option 'freezng' (did you mean "
                             "'freezing'?)"),
    "onnxruntime-option-typo": ({"c.yaml": campaign(targets="[{backend: onnxruntime@cpu, options: {opst: 18}}]")},
                                ["run", "{d}/c.yaml", "--out", "{d}/run"], "did you mean 'opset'"),
    "onnxruntime-level": ({"c.yaml": campaign(
        targets="[{backend: onnxruntime@cpu, options: {graph_optimization_level: max}}]")},
        ["run", "{d}/c.yaml", "--out", "{d}/run"], "graph_optimization_level 'max' is not one of"),
    "eager-takes-no-option": ({"c.yaml": campaign(targets="[{backend: eager@cpu, label: e, options: {x: 1}}]")},
                              ["run", "{d}/c.yaml", "--out", "{d}/run"], "eager has no option 'x' (it takes none)"),
    "hidden-label": ({"c.yaml": campaign(targets="[{backend: eager@cpu, label: .hidden}]")},
                     ["run", "{d}/c.yaml", "--out", "{d}/run"], "backends.targets[0].label"),
    "path-label": ({"c.yaml": campaign(targets="[{backend: eager@cpu, label: a/b}]")},
                   ["run", "{d}/c.yaml", "--out", "{d}/run"], "backends.targets[0].label"),
    "duplicate-label": ({"c.yaml": campaign(targets="[inductor@cpu, inductor@cpu]")},
                        ["run", "{d}/c.yaml", "--out", "{d}/run"], "inductor@cpu is named twice"),
    "name-from-bad-stem": ({"bad name.yaml": campaign(name="")}, ["run", "{d}/bad name.yaml", "--out", "{d}/run"],
                           "'bad name' (from the file name) cannot name a run folder"),
    "path-name": ({"c.yaml": campaign(name="../up")}, ["run", "{d}/c.yaml", "--out", "{d}/run"], "name"),
    "unknown-source": ({"c.yaml": campaign(seeds="seeds: [{source: timmm}]\n")},
                       ["run", "{d}/c.yaml", "--out", "{d}/run"], "unknown seed source 'timmm' (did you mean 'timm'?)"),
    "no-seed-selection": ({"c.yaml": campaign(seeds="seeds: []\n")}, ["run", "{d}/c.yaml", "--out", "{d}/run"],
                          "seeds"),
    "selection-matches-nothing": ({"c.yaml": campaign(seeds="seeds: [{source: timm, include: 'nothing*'}]\n")},
                                  ["run", "{d}/c.yaml", "--out", "{d}/run"], "no timm seed matches"),
    "unknown-stack": ({"c.yaml": campaign(targets="[inductr@cpu]")}, ["run", "{d}/c.yaml", "--out", "{d}/run"],
                      "unknown backend stack 'inductr' (did you mean 'inductor'?)"),
    "unknown-device": ({"c.yaml": campaign(targets="[inductor@gpu]")}, ["run", "{d}/c.yaml", "--out", "{d}/run"],
                       "unknown device 'gpu'"),
    "no-device": ({"c.yaml": campaign(targets="[inductor]")}, ["run", "{d}/c.yaml", "--out", "{d}/run"],
                  "not of the form stack@device"),
    "no-targets": ({"c.yaml": campaign(targets="[]")}, ["run", "{d}/c.yaml", "--out", "{d}/run"],
                   "name at least one target backend"),
    "oracle-elsewhere": ({"c.yaml": campaign("backends: {oracle: eager-fp64@cuda, targets: [inductor@cpu]}")},
                         ["run", "{d}/c.yaml", "--out", "{d}/run"], "the oracle must run on the reference's device"),
    "no-mutator-left": ({"c.yaml": campaign("variants: {per_seed: 3, mutators: [inject_op], exclude_mutators: "
                                            "[injection]}")}, ["run", "{d}/c.yaml", "--out", "{d}/run"],
                        "no mutator is left"),
    "sample-zero": ({"c.yaml": campaign(seeds="seeds: [{source: timm, include: [test_*], sample: 0}]\n")},
                    ["run", "{d}/c.yaml", "--out", "{d}/run"], "seeds[0]: sample 0 selects no seed"),
    "empty-out": ({"c.yaml": OK}, ["run", "{d}/c.yaml", "--out", ""], "argument --out: an empty path"),
    "negative-limit": ({}, ["triage", "{d}/run", "--limit", "-3"], "argument --limit: '-3'"),
    "nan-scan-timeout": ({}, ["seeds", "scan", "--timeout", "nan"], "argument --timeout: 'nan'"),
    "no-command": ({}, [], "the following arguments are required: command"),
    "unknown-command": ({}, ["frob"], "invalid choice: 'frob'"),
    "unknown-mutator": ({"c.yaml": campaign("variants: {mutators: [no_such_mutator]}")},
                        ["run", "{d}/c.yaml", "--out", "{d}/run"], "no mutator matches 'no_such_mutator'"),
    "class-not-found": ({"c.yaml": campaign(targets="[{class: 'no.such.module:Backend'}]")},
                        ["run", "{d}/c.yaml", "--out", "{d}/run"], "cannot be loaded"),
    "class-raises-on-import": ({"c.yaml": campaign(targets="[{class: 'hostile_raises:B'}]"),
                                "hostile_raises.py": "raise RuntimeError('plug-in broke')\n"},
                               ["run", "{d}/c.yaml", "--out", "{d}/run"], "RuntimeError: plug-in broke"),
    "class-syntax-error": ({"c.yaml": campaign(targets="[{class: 'hostile_syntax:B'}]"),
                            "hostile_syntax.py": "def f(:\n"}, ["run", "{d}/c.yaml", "--out", "{d}/run"],
                           "SyntaxError"),
    "class-missing": ({"c.yaml": campaign(targets="[{class: 'hostile_empty:Nope'}]"), "hostile_empty.py": ""},
                      ["run", "{d}/c.yaml", "--out", "{d}/run"], "'hostile_empty:Nope' cannot be loaded"),
    # --- the run folder and flags
    "out-is-a-file": ({"c.yaml": OK, "run": "a file"}, ["run", "{d}/c.yaml", "--out", "{d}/run"],
                      "exists and is not a folder"),
    "out-not-writable": ({"c.yaml": OK}, ["run", "{d}/c.yaml", "--out", "/proc/gapfuzz-run"], "/proc/gapfuzz-run"),
    "resume-nothing": ({"c.yaml": OK}, ["run", "{d}/c.yaml", "--out", "{d}/run", "--resume"],
                       "holds no campaign to resume"),
    "resume-malformed-stored": ({"c.yaml": OK, "run/campaign.yaml": "seeds: [\n"},
                                ["run", "{d}/c.yaml", "--out", "{d}/run", "--resume"],
                                "run/campaign.yaml: not valid YAML at line"),
    "stored-without-resume": ({"c.yaml": OK, "run/campaign.yaml": OK}, ["run", "{d}/c.yaml", "--out", "{d}/run"],
                              "already holds a campaign: add --resume"),
    "bad-address": ({"c.yaml": OK}, ["run", "{d}/c.yaml", "--out", "{d}/run", "--address", "not-an-address"],
                    "--address 'not-an-address': expected host:port"),
    "unreachable-address": ({"c.yaml": OK}, ["run", "{d}/c.yaml", "--out", "{d}/run", "--address", "127.0.0.1:1"],
                            "--address 127.0.0.1:1: no Ray cluster answers there"),
    # --- reading run folders
    "triage-missing": ({}, ["triage", "{d}/nope"], "nope: no such run folder"),
    "triage-empty": ({"run/campaign.yaml": OK}, ["triage", "{d}/run"], "holds no records"),
    "triage-foreign-parquet": ({"run/records/x/part-1.parquet": "FOREIGN"}, ["triage", "{d}/run"],
                               "not a gapfuzz record file"),
    "triage-torn-parquet": ({"run/records/x/part-1.parquet": b"PAR1 not really"}, ["triage", "{d}/run"],
                            "not a readable Parquet file"),
    "triage-malformed-campaign": ({"run/records/x/part-1.parquet": "RECORDS", "run/campaign.yaml": "a: [\n"},
                                  ["triage", "{d}/run"], "campaign.yaml: not valid YAML"),
    "triage-list-key-campaign": ({"run/records/x/part-1.parquet": "RECORDS",
                                  "run/campaign.yaml": OK + "? [a, b]\n: 1\n"},
                                 ["triage", "{d}/run"], "campaign.yaml: not valid YAML at line 4: a key is a list"),
    "repro-list-key-campaign": ({"run/records/x/part-1.parquet": "RECORDS",
                                 "run/campaign.yaml": OK + "? [a, b]\n: 1\n"},
                                ["repro", "{d}/run", "c-"], "campaign.yaml: not valid YAML at line 4: a key is a list"),
    "resume-list-key-campaign": ({"c.yaml": OK, "run/campaign.yaml": OK + "? [a, b]\n: 1\n"},
                                 ["run", "{d}/c.yaml", "--out", "{d}/run", "--resume"],
                                 "run/campaign.yaml: not valid YAML at line 4: a key is a list"),
    # a deeply nested JSON value in a record of a folder before schema 7 (its nested columns JSON text)
    "triage-deep-json": ({"run/records/x/part-1.parquet": {"backend_options": "[" * 50_000 + "]" * 50_000}},
                         ["triage", "{d}/run"], "part-1.parquet: timm/test_resnet#0 on b@cpu: its record's "
                                                "backend_options is not what gapfuzz writes there (ValueError: JSON "
                                                "nested more than 64 levels deep)"),
    "diff-deep-json": ({"run/records/x/part-1.parquet": {"backend_options": "{\"a\": " + "[" * 50_000 + "]" * 50_000
                                                          + "}"}, "old/records/x/part-1.parquet": "RECORDS"},
                       ["diff", "{d}/old", "{d}/run"], "its record's backend_options is not what gapfuzz writes"),
    "report-deep-json": ({"run/records/x/part-1.parquet": {"versions": "[" * 50_000 + "]" * 50_000}},
                         ["report", "{d}/run", "--out", "{d}/r.html"], "its record's versions is not what gapfuzz"),
    "report-into-a-file": ({"run/records/x/part-1.parquet": "RECORDS", "f": "a file"},
                           ["report", "{d}/run", "--out", "{d}/f/report.html"], "cannot write the report"),
    "diff-missing": ({"run/records/x/part-1.parquet": "RECORDS"}, ["diff", "{d}/run", "{d}/nope"],
                     "no such run folder"),
    "repro-unknown-cluster": ({"run/records/x/part-1.parquet": "RECORDS"}, ["repro", "{d}/run", "c-nope"],
                              "'c-nope': no such cluster"),
    "repro-foreign-plugin": ({"run/records/x/part-1.parquet": "RECORDS",  # importing it would write a file
                              "run/campaign.yaml": campaign(targets="[{class: 'hostile_marker:B'}]"),
                              "hostile_marker.py": "open(__file__ + '.imported', 'w').close()\n"},
                             ["repro", "{d}/run", "c-"], "only with --allow-plugins"),
    "seeds-unknown-source": ({}, ["seeds", "list", "--source", "timmm"], "unknown seed source 'timmm'"),
    "seeds-nothing-matches": ({}, ["seeds", "list", "--filter", "timm/nothing*"], "no seed matches"),
    "scan-out-is-a-file": ({"f": "a file"}, ["seeds", "scan", "--filter", "timm/test_resnet", "--out", "{d}/f"],
                           "exists and is not a folder"),
    # --- integer-valued floats: JSON Schema calls 2.0 an integer, range() and Ray do not
    "float-per-seed": ({"c.yaml": campaign("variants: {per_seed: 2.0}")}, ["run", "{d}/c.yaml", "--out", "{d}/run"],
                       "variants.per_seed: expected a whole number, got 2.0 (did you mean 2?)"),
    "float-limit": ({"c.yaml": campaign(seeds="seeds: [{source: timm, include: [test_resnet], limit: 1.0}]\n")},
                    ["run", "{d}/c.yaml", "--out", "{d}/run"], "seeds[0].limit: expected a whole number, got 1.0 "
                                                               "(did you mean 1?)"),
    "float-sample": ({"c.yaml": campaign(seeds="seeds: [{source: timm, include: [test_*], sample: 2.0}]\n")},
                     ["run", "{d}/c.yaml", "--out", "{d}/run"], "seeds[0].sample: expected a whole number, got 2.0"),
    "float-workers": ({"c.yaml": campaign("pools: {cpu: {workers: 1.0}}")}, ["run", "{d}/c.yaml", "--out", "{d}/run"],
                      "pools.cpu.workers: expected a whole number, got 1.0 (did you mean 1?)"),
    "float-sizes": ({"c.yaml": campaign("sizes: {per_seed: 1.0}")}, ["run", "{d}/c.yaml", "--out", "{d}/run"],
                    "sizes.per_seed: expected a whole number, got 1.0 (did you mean 1?)"),
    # --- keys that are not names
    "int-key": ({"c.yaml": campaign("1: a")}, ["run", "{d}/c.yaml", "--out", "{d}/run"],
                "the top level: the key 1 is not a name"),
    "int-pool-key": ({"c.yaml": campaign("pools: {7: {workers: 1}}")}, ["run", "{d}/c.yaml", "--out", "{d}/run"],
                     "pools: the key 7 is not a name"),
    "null-key": ({"c.yaml": campaign("null: 3")}, ["run", "{d}/c.yaml", "--out", "{d}/run"],
                 "the key null is not a name"),
    "int-option-key": ({"c.yaml": campaign(targets="[{backend: inductor@cpu, options: {1: 2}}]")},
                       ["run", "{d}/c.yaml", "--out", "{d}/run"],
                       "backends.targets[0].options: the key 1 is not a name"),
    # --- bounds: size, aliases, nesting, counts
    "huge-file": ({"c.yaml": OK + "description: '" + "x" * 1_100_000 + "'\n"},
                  ["run", "{d}/c.yaml", "--out", "{d}/run"], "at most 131072 bytes are read"),
    "a-device": ({}, ["run", "/dev/zero", "--out", "{d}/run"],
                 "/dev/zero: cannot read campaign file: not a regular file"),
    "billion-laughs": ({"c.yaml": campaign(
        targets="[{backend: inductor@cpu, options: {x: &a [1,1,1,1,1,1,1,1,1,1], b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a],"
                " c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b], d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c],"
                " e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d], f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e],"
                " g: [*f,*f,*f,*f,*f,*f,*f,*f,*f,*f]}}]")},
        ["run", "{d}/c.yaml", "--out", "{d}/run"], "its aliases expand to more than 200000 values"),
    "deep-nesting": ({"c.yaml": campaign("description: " + "[" * 20_000 + "]" * 20_000)},
                     ["run", "{d}/c.yaml", "--out", "{d}/run"], "nested more than 64 levels deep"),
    "huge-per-seed": ({"c.yaml": campaign("variants: {per_seed: 1000000000000}")},
                      ["run", "{d}/c.yaml", "--out", "{d}/run"],
                      "variants.per_seed: 1000000000000 is greater than the maximum of 10000"),
    "huge-sample": ({"c.yaml": campaign(seeds="seeds: [{source: timm, sample: 1000000000000}]\n")},
                    ["run", "{d}/c.yaml", "--out", "{d}/run"], "seeds[0].sample: 1000000000000 is greater than the "
                                                               "maximum of 1000000"),
    "huge-workers": ({"c.yaml": campaign("pools: {cpu: {workers: 100000}}")}, ["run", "{d}/c.yaml", "--out", "{d}/run"],
                     "pools.cpu.workers"),
    "huge-sizes": ({"c.yaml": campaign("sizes: {per_seed: 100000}")}, ["run", "{d}/c.yaml", "--out", "{d}/run"],
                   "sizes.per_seed: 100000 is greater than the maximum of 100"),
    # --- names: \Z, not $, and a length limit checked before any work
    "label-newline": ({"c.yaml": campaign(targets='[{backend: eager@cpu, label: "ort\\n"}]')},
                      ["run", "{d}/c.yaml", "--out", "{d}/run"], "backends.targets[0].label: 'ort\\n' cannot name a "
                                                                 "folder"),
    "long-label": ({"c.yaml": campaign(targets="[{backend: eager@cpu, label: " + "a" * 300 + "}]")},
                   ["run", "{d}/c.yaml", "--out", "{d}/run"], "at most 100 characters"),
    "long-name": ({"c.yaml": campaign(name="n" * 300)}, ["run", "{d}/c.yaml", "--out", "{d}/run"],
                  "name: 'nnnnn"),
    # --- no program from a campaign's settings: a pool's env, a release, an image (Ray's command lines)
    "pool-env-pythonpath": ({"c.yaml": campaign("pools: {cpu: {env: {PYTHONPATH: evil}}}"), "evil/sitecustomize.py":
                             "open('RAN', 'w').close()\n"}, ["run", "{d}/c.yaml", "--out", "{d}/run"],
                            "pools.cpu.env.PYTHONPATH: a pool's env reaches every sandbox process and can make it "
                            "load code; gapfuzz sets PYTHONPATH only with --allow-exec-options"),
    "pool-env-ld-preload-check": ({"c.yaml": campaign("pools: {cuda: {env: {LD_PRELOAD: /tmp/x.so}}}")},
                                  ["run", "{d}/c.yaml", "--check"], "pools.cuda.env.LD_PRELOAD:"),
    "pool-env-not-a-name": ({"c.yaml": campaign("pools: {cpu: {env: {'A=B': '1'}}}")},
                            ["run", "{d}/c.yaml", "--out", "{d}/run", "--allow-exec-options"],
                            "pools.cpu.env: 'A=B' is not a variable name"),
    "release-not-a-version": ({"c.yaml": campaign(targets='[{backend: onnxruntime@cpu, versions: ["latest"]}]')},
                              ["run", "{d}/c.yaml", "--out", "{d}/run"], "backends.targets[0].versions[0]: 'latest' "
                                                                         "is not a release as a package index spells"),
    "release-shell": ({"c.yaml": campaign(targets='[{backend: inductor@cpu, torch: "2.1; touch RAN"}]')},
                      ["run", "{d}/c.yaml", "--check"], "torch: '2.1; touch RAN' is not a release"),
    "image-shell": ({"c.yaml": campaign(targets='[{backend: onnxruntime@cpu, versions: ["1.31.1"], '
                                                'images: {"1.31.1": "ort $(touch RAN)"}}]')},
                    ["run", "{d}/c.yaml", "--out", "{d}/run"], "images.1.31.1: 'ort $(touch RAN)' is not a container "
                                                               "image reference"),
    # --- a run folder writes only inside itself
    "run-inside-records": ({"c.yaml": OK, "run/records/x/part-1.parquet": "RECORDS"},
                           ["run", "{d}/c.yaml", "--out", "{d}/run/records/new"], "inside the run folder"),
    "run-inside-a-run": ({"c.yaml": OK, "run/records/x/part-1.parquet": "RECORDS"},
                         ["run", "{d}/c.yaml", "--out", "{d}/run/sub"], "inside the run folder"),
    "report-into-records": ({"run/records/x/part-1.parquet": "RECORDS"},
                            ["report", "{d}/run", "--out", "{d}/run/records/x.parquet"], "which holds only records"),
    "report-into-another-run": ({"run/records/x/part-1.parquet": "RECORDS",
                                 "other/records/x/part-1.parquet": "RECORDS"},
                                ["report", "{d}/run", "--out", "{d}/other/report.html"], "inside the run folder"),
    "report-out-is-a-folder": ({"run/records/x/part-1.parquet": "RECORDS", "dir/x": ""},
                               ["report", "{d}/run", "--out", "{d}/dir"], "is a folder; give --out the report's file"),
    # --- records that are not what gapfuzz writes
    "repro-recipe-not-json": ({"run/records/x/part-1.parquet": {"backend": "inductor@cpu", "recipe": "{not json"},
                               "run/campaign.yaml": OK}, ["repro", "{d}/run", "c-"], "its record's recipe is not what "
                                                                                      "gapfuzz writes there"),
    "repro-recipe-not-a-recipe": ({"run/records/x/part-1.parquet": {"backend": "inductor@cpu", "recipe": "[1, 2]"},
                                   "run/campaign.yaml": OK}, ["repro", "{d}/run", "c-"], "recipe is not what"),
    "repro-probe-not-json": ({"run/records/x/part-1.parquet": {"backend": "inductor@cpu", "probe_recipe": "{"},
                              "run/campaign.yaml": OK}, ["repro", "{d}/run", "c-"], "its record's probe_recipe"),
    "repro-backend-not-in-campaign": ({"run/records/x/part-1.parquet": "RECORDS", "run/campaign.yaml": OK},
                                      ["repro", "{d}/run", "c-"], "its backend 'b@cpu' is not one of the campaign's"),
    "repro-not-a-seed-id": ({"run/records/x/part-1.parquet": {"backend": "inductor@cpu",
                                                              "recipe": '{"mutations":[],"rng":0,"seed":"nope"}'},
                             "run/campaign.yaml": OK}, ["repro", "{d}/run", "c-"], "seed id 'nope'"),
    "repro-mutation-without-its-params": (
        {"run/records/x/part-1.parquet": {"backend": "inductor@cpu", "recipe": '{"mutations":[["insert_unary",{}]],'
                                          '"rng":0,"seed":"timm/test_resnet"}'},
         "run/campaign.yaml": OK}, ["repro", "{d}/run", "c-"], "mutations ['insert_unary'] do not replay"),
    # --- the environment: no network, a folder that cannot be made
    "scan-out-in-proc": ({}, ["seeds", "scan", "--filter", "timm/test_resnet", "--out", "/proc/gapfuzz-x"],
                         "/proc/gapfuzz-x: cannot write the catalog there"),
    "triage-unreachable-store": ({}, ["triage", "s3://gapfuzz-no-such-bucket/runs/x"], "cannot be reached"),
}


def _write_records(path: Path, text: str, **fields) -> None:
    """A records file: one failed run (a cluster to ask for; ``fields`` replace its values), or a Parquet
    file of someone else's schema."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from gapfuzz.results.schema import RunRecord, arrow_schema

    path.parent.mkdir(parents=True, exist_ok=True)
    if text == "FOREIGN":
        pq.write_table(pa.table({"a": [1, 2], "b": ["x", "y"]}), path)
        return
    rec = RunRecord(**{**dict(campaign="h", variant_id="timm/test_resnet#0", seed_id="timm/test_resnet",
                              backend="b@cpu", stack="b", device="cpu", status="error", stage="compile",
                              error_type="RuntimeError", message="no kernel",
                              recipe='{"mutations":[],"rng":0,"seed":"timm/test_resnet"}'), **fields})
    try:
        table = pa.Table.from_pylist([rec.to_row()], schema=arrow_schema())
    except (ValueError, TypeError, AttributeError, KeyError):  # text no writer makes now: a schema-6 file's JSON
        import json

        from gapfuzz.results.schema import legacy_schema

        row = {k: json.dumps(v) if isinstance(v, dict) else v for k, v in rec.__dict__.items()}
        table = pa.Table.from_pylist([{**row, "schema_version": 6}], schema=legacy_schema())
    pq.write_table(table, path)


def _setup(d: Path, files: dict) -> None:
    for name, content in files.items():
        p = d / name
        p.parent.mkdir(parents=True, exist_ok=True)
        if name.endswith(".parquet") and isinstance(content, dict):  # a record with these values
            _write_records(p, "RECORDS", **content)
        elif name.endswith(".parquet") and content in ("FOREIGN", "RECORDS"):
            _write_records(p, content)
        elif isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content)


def _tree(d: Path) -> set:
    return {(str(p.relative_to(d)), p.stat().st_size) for p in d.rglob("*") if p.is_file()} | \
           {str(p.relative_to(d)) for p in d.rglob("*") if p.is_dir()}


def in_process(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(argv)
        except SystemExit as e:  # argparse's way out
            code = e.code
    return code, err.getvalue()


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_bad_input_is_one_line_exit_2_and_writes_nothing(case, tmp_path, monkeypatch):
    files, argv, needle = CASES[case]
    _setup(tmp_path, files)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))  # the hostile plug-in modules
    before = _tree(tmp_path)
    t0 = time.monotonic()
    code, err = in_process([a.replace("{d}", str(tmp_path)) for a in argv])
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("gapfuzz: ") and "Traceback" not in err, err
    assert needle in lines[0], lines[0]
    assert _tree(tmp_path) == before, "something was written"
    assert time.monotonic() - t0 < 30


def test_there_are_at_least_forty_cases():
    assert len(CASES) >= 40


def _env(**extra) -> dict:
    return {**os.environ, **extra}


@pytest.mark.parametrize("variable, value, needle", [
    ("GAPFUZZ_PLUGINS", "no_such_plugin_module", "GAPFUZZ_PLUGINS: module 'no_such_plugin_module' cannot be imported"),
    ("GAPFUZZ_PLUGINS", "hostile_syntax", "GAPFUZZ_PLUGINS: module 'hostile_syntax' cannot be imported: SyntaxError"),
    ("GAPFUZZ_CACHE_DIR", "{d}/cachefile", "cachefile is a file, not a folder"),
    ("XDG_CACHE_HOME", "{d}/cachefile", "capture cache {d}/cachefile/gapfuzz: {d}/cachefile is a file, not a folder"),
    ("HOME", "{d}/cachefile", "capture cache {d}/cachefile/.cache/gapfuzz: {d}/cachefile is a file, not a folder"),
])
def test_a_bad_environment_is_one_line_before_anything_is_written(tmp_path, variable, value, needle):
    (tmp_path / "c.yaml").write_text(OK)
    (tmp_path / "cachefile").write_text("not a folder")
    (tmp_path / "hostile_syntax.py").write_text("def f(:\n")
    env = _env(**{variable: value.replace("{d}", str(tmp_path))},
               PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ["PYTHONPATH"]]))
    if variable != "GAPFUZZ_CACHE_DIR":
        env.pop("GAPFUZZ_CACHE_DIR", None)  # it would stand before XDG_CACHE_HOME
    if variable == "HOME":
        env.pop("XDG_CACHE_HOME", None)  # it would stand before HOME
    needle = needle.replace("{d}", str(tmp_path))
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "gapfuzz.fuzzer.cli", "run", str(tmp_path / "c.yaml"), "--out",
                           str(tmp_path / "run")], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and needle in lines[0], proc.stderr
    assert not (tmp_path / "run").exists()


def test_a_home_where_no_cache_can_be_made_lists_seeds_with_one_line_saying_so(tmp_path):
    import subprocess
    import sys

    (tmp_path / "home").write_text("not a folder")
    env = _env(HOME=str(tmp_path / "home"))
    env.pop("GAPFUZZ_CACHE_DIR", None)
    env.pop("XDG_CACHE_HOME", None)
    proc = subprocess.run([sys.executable, "-m", "gapfuzz.fuzzer.cli", "seeds", "list", "--source", "ops", "--filter",
                           "*nn.functional.relu/*"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    said = [line for line in proc.stderr.splitlines() if "gapfuzz" in line]
    assert proc.returncode == 0 and "ops/nn.functional.relu/float32/0" in proc.stdout, proc.stderr[-2000:]
    assert len(said) == 1 and "cannot be written" in said[0] and "Traceback" not in proc.stderr


def test_numbers_read_as_yaml_1_2_does(tmp_path):
    from gapfuzz.fuzzer.config.campaign import load_campaign

    path = tmp_path / "c.yaml"
    path.write_text(campaign("compare: {tolerances: {float32: [1e-5, 2E-6]}, multiplier: 3e0}"))
    c = load_campaign(path)
    assert c.compare.settings.tolerances["float32"] == (1e-5, 2e-6) and c.compare.settings.multiplier == 3.0


def test_an_unreachable_cluster_fails_fast_as_a_user_would_see_it(tmp_path):
    (tmp_path / "c.yaml").write_text(OK)
    t0 = time.monotonic()
    proc = gapfuzz("run", tmp_path / "c.yaml", "--out", tmp_path / "run", "--address", "127.0.0.1:1", cwd=tmp_path)
    assert proc.returncode == 2 and "127.0.0.1:1" in proc.stderr and proc.stderr.count("\n") == 1
    assert time.monotonic() - t0 < 30 and not (tmp_path / "run").exists()


# ---------------------------------------------------------------- a poisoned run folder runs no code
MARKER_MODULE = "import pathlib\npathlib.Path(__file__).with_name('IMPORTED').touch()\nclass B:\n    name = 'b'\n"
PAYLOAD = '"""\nimport pathlib; pathlib.Path("RAN").touch()\n"""'


def _poisoned_run(d: Path) -> Path:
    """A run folder whose campaign names a plug-in that leaves a mark when imported, and whose record
    fields carry Python that leaves a mark when executed."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from gapfuzz.results.schema import RunRecord, arrow_schema

    (d / "hostile_marker.py").write_text(MARKER_MODULE)
    run = d / "run"
    (run / "records" / "b@cpu").mkdir(parents=True)
    (run / "campaign.yaml").write_text(campaign(targets="[{class: 'hostile_marker:B'}]"))
    rec = RunRecord(campaign=PAYLOAD, variant_id=f"timm/test_resnet#0{PAYLOAD}", seed_id="timm/test_resnet",
                    backend="b@cpu", stack="b", device="cpu", status="error", stage="compile",
                    error_type=PAYLOAD, message=PAYLOAD, recipe='{"mutations":[],"rng":0,"seed":"timm/test_resnet"}')
    pq.write_table(pa.Table.from_pylist([rec.to_row()], schema=arrow_schema()), run / "records/b@cpu/part-1.parquet")
    return run


def test_triage_report_diff_and_repro_run_no_code_from_a_poisoned_folder(tmp_path, monkeypatch):
    run = _poisoned_run(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    for argv in (["triage", str(run)], ["report", str(run), "--out", str(tmp_path / "r.html")],
                 ["diff", str(run), str(run)]):
        code, err = in_process(argv)
        assert code == 0, err
    code, err = in_process(["repro", str(run), "c-"])
    assert code == 2 and "--allow-plugins" in err
    assert not (tmp_path / "IMPORTED").exists() and not (tmp_path / "RAN").exists()
    assert "import pathlib" in (tmp_path / "r.html").read_text().replace("&quot;", '"')  # shown, as text


def test_resume_compares_a_stored_campaign_without_importing_its_plugins(tmp_path, monkeypatch):
    run = _poisoned_run(tmp_path)
    (tmp_path / "mine.yaml").write_text(OK)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    code, err = in_process(["run", str(tmp_path / "mine.yaml"), "--out", str(run), "--resume"])
    assert code == 2 and "differs from the campaign in" in err, err
    assert not (tmp_path / "IMPORTED").exists()


def test_a_reproducer_holds_record_values_only_as_literals(tmp_path, captured_vit):
    """A record's text used to enter repro.py's docstring as source: a value that closed the string
    ran as code when the reproducer did."""
    import ast
    import subprocess
    import sys

    from gapfuzz.fuzzer.repro.code import reproducer, save_inputs
    from gapfuzz.fuzzer.repro.shrink.passes import cut_after
    from gapfuzz.workers.run.registry import parse_backend

    v = captured_vit.variant
    small = cut_after(v, next(n.name for n in v.gm.graph.nodes if n.op == "call_function"))
    record = {"status": "error", "stage": "compile", "campaign": PAYLOAD, "variant_id": PAYLOAD, "seed_id": PAYLOAD,
              "verdict": PAYLOAD, "symptom": PAYLOAD}
    code = reproducer(small, parse_backend("eager@cpu", label="t"), record, PAYLOAD, {"tolerances": {}})
    tree = ast.parse(code)
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == "pathlib"]  # only in strings
    (tmp_path / "repro.py").write_text(code)
    save_inputs(small, tmp_path / "inputs.pt")
    proc = subprocess.run([sys.executable, "repro.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr  # eager ran without error: the bug is not present
    assert not (tmp_path / "RAN").exists()


def test_a_poisoned_capture_cache_entry_is_a_miss_not_a_call(tmp_path, monkeypatch):
    import json

    import torch

    from gapfuzz.fuzzer.generate import captured
    from gapfuzz.seeds.capture_cache import CaptureCache

    monkeypatch.setenv("GAPFUZZ_CACHE_DIR", str(tmp_path / "cache"))
    info, cap = captured("timm/test_resnet", None)
    cache = CaptureCache()
    path = cache.path("timm/test_resnet")
    entry = torch.load(path, weights_only=True)
    graph = json.loads(entry["graph"])
    graph.insert(1, ["call_function", "evil", "py:os:system", {"t": [f"touch {tmp_path}/RAN"]}, {"d": []}])
    entry["graph"] = json.dumps(graph)
    torch.save(entry, path)
    assert cache.get("timm/test_resnet", None) is None  # refused, then captured again
    again_info, again = captured("timm/test_resnet", None)
    assert again.variant.graph_hash == cap.variant.graph_hash and not (tmp_path / "RAN").exists()
    assert cache.get("timm/test_resnet", None) is not None  # the entry was replaced by a good one


def test_triage_and_report_read_the_dict_form_of_a_reference(tmp_path, monkeypatch):
    """``reference: {backend: eager@cpu}`` is documented; triage and the report used to break on it."""
    run = tmp_path / "run"
    _setup(tmp_path, {"run/records/x/part-1.parquet": "RECORDS"})
    (run / "campaign.yaml").write_text(campaign("backends: {reference: {backend: eager@cpu, label: ref}, "
                                                "oracle: {backend: eager-fp64@cpu}, targets: [inductor@cpu]}"))
    from gapfuzz.analysis.api import load_run

    r = load_run(run)
    assert (r.reference, r.oracle) == ("ref@cpu", "eager-fp64@cpu")
    monkeypatch.chdir(tmp_path)
    for argv in (["triage", str(run)], ["report", str(run), "--out", str(tmp_path / "r.html")]):
        code, err = in_process(argv)
        assert code == 0, err


# ---------------------------------------------------------------- hardening sweep: files, links, pipes
def test_a_fifo_is_refused_at_once_not_read(tmp_path, monkeypatch):
    fifo = tmp_path / "c.yaml"
    os.mkfifo(fifo)  # opening it would wait for a writer that never comes
    monkeypatch.chdir(tmp_path)
    t0 = time.monotonic()
    code, err = in_process(["run", str(fifo), "--out", str(tmp_path / "run")])
    assert code == 2 and "c.yaml: cannot read campaign file: not a regular file" in err and err.count("\n") == 1, err
    assert time.monotonic() - t0 < 10 and not (tmp_path / "run").exists()


def test_a_known_pattern_that_backtracks_without_end_is_one_line_not_a_hang(tmp_path, monkeypatch):
    _setup(tmp_path, {"run/records/x/part-1.parquet": {"message": "a" * 40 + "!"}})
    (tmp_path / "known.yaml").write_text("_known:\n  - {name: slow, where: {message: '(a|aa)+$'}}\n")
    monkeypatch.chdir(tmp_path)
    t0 = time.monotonic()
    code, err = in_process(["triage", str(tmp_path / "run"), "--known", str(tmp_path / "known.yaml")])
    assert code == 2 and err.count("\n") == 1 and "known.yaml: slow: a regular expression took more than" in err, err
    assert time.monotonic() - t0 < 30
    (tmp_path / "known.yaml").write_text("_known:\n  - {name: bad, where: {message: '(a'}}\n")
    code, err = in_process(["triage", str(tmp_path / "run"), "--known", str(tmp_path / "known.yaml")])
    assert code == 2 and err.count("\n") == 1 and "bad: where message: bad regular expression '(a'" in err, err


def test_readers_follow_no_symbolic_link_out_of_or_around_a_run_folder(tmp_path, monkeypatch):
    from gapfuzz.analysis.api import load_run

    _setup(tmp_path, {"run/records/x/part-1.parquet": "RECORDS"})
    records = tmp_path / "run" / "records"
    (records / "root").symlink_to("/")  # walked, this reads the whole machine until something fails
    (records / "x" / "loop").symlink_to("..")  # followed, this reads every file again, ~40 levels deep
    (records / "linked.parquet").symlink_to(records / "x" / "part-1.parquet")
    monkeypatch.chdir(tmp_path)
    t0 = time.monotonic()
    assert len(load_run(tmp_path / "run")) == 1
    code, err = in_process(["triage", str(tmp_path / "run")])
    assert code == 0, err
    assert time.monotonic() - t0 < 30
    (tmp_path / "run" / "campaign.yaml").symlink_to("/dev/zero")  # read whole, this never ends
    code, err = in_process(["triage", str(tmp_path / "run")])
    assert code == 2 and err.count("\n") == 1 and "campaign.yaml: a symbolic link inside the run folder" in err, err


def test_no_hidden_temporary_file_outlives_a_failed_write(tmp_path, monkeypatch):
    import errno

    from gapfuzz.results.folder import Folder

    def full_disk(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(OSError):
        Folder(tmp_path / "run").write_bytes(b"x" * 1000, "records", "b@cpu", "part-1.parquet")
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == []


def test_a_reproducer_runs_where_no_file_of_a_run_folder_can_stand_in_for_a_module(tmp_path):
    """``repros/<cluster>/torch.py`` (or a ``sitecustomize.py``) shipped in a run folder is never run."""
    from gapfuzz.fuzzer.repro.minimise import verify

    writer = f"open({str(tmp_path / 'RAN')!r}, 'a').write(__name__)\n"
    for planted in ("torch.py", "sitecustomize.py", "usercustomize.py", "numpy.py"):
        (tmp_path / planted).write_text(writer)
    (tmp_path / "repro.py").write_text("import sys\nimport torch\nprint(torch.__file__)\nsys.exit(1)\n")
    failures, last = verify(tmp_path, tries=1, timeout=120)
    assert failures == 1 and "site-packages" in last and not (tmp_path / "RAN").exists(), last


def test_output_the_terminal_cannot_encode_and_a_closed_pipe_end_quietly(tmp_path):
    import subprocess
    import sys

    _setup(tmp_path, {"run/records/x/part-1.parquet": {"message": "no kernel for \u2026 \u00e9\u4e2d " * 8}})
    env = _env(PYTHONIOENCODING="ascii")
    for argv in (["mutators"], ["triage", str(tmp_path / "run")]):
        proc = subprocess.run([sys.executable, "-m", "gapfuzz.fuzzer.cli", *argv], cwd=tmp_path, env=env,
                              capture_output=True, timeout=300)
        assert proc.returncode == 0 and b"Traceback" not in proc.stderr, proc.stderr.decode()[-2000:]
    assert b"\\u2026" in proc.stdout  # shown escaped, not an error after the work is done
    read, write = os.pipe()
    os.close(read)  # `gapfuzz mutators | head -3`, with head gone before the table is printed
    try:
        proc = subprocess.run([sys.executable, "-m", "gapfuzz.fuzzer.cli", "mutators"], stdout=write,
                              stderr=subprocess.PIPE, cwd=tmp_path, text=True, timeout=300)
    finally:
        os.close(write)
    assert proc.returncode == 141 and proc.stderr == "", proc.stderr


def test_ray_that_does_not_start_is_retried_once_then_one_line(monkeypatch):
    """A node that times out during start-up (a loaded machine) gets a second, longer try; a second
    failure is one ConnectionError line that the CLI prints as it is."""
    import ray

    from gapfuzz.workers.run import pool

    calls = []

    def slow_start(**kwargs):
        calls.append(os.environ.get("RAY_raylet_start_wait_time_s"))
        raise RuntimeError("The current node timed out during startup. This could happen because ...\nmore")

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", slow_start)
    monkeypatch.setattr(ray, "shutdown", lambda: None)
    monkeypatch.delenv("RAY_raylet_start_wait_time_s", raising=False)
    with pytest.raises(ConnectionError, match=r"did not start .*timed out during startup\. This could happen") as e:
        pool.connect(None, 1)
    assert calls == [None, "120"] and "\n" not in str(e.value)


# ---------------------------------------------------------------- record columns of another type (issue 58)
DEEP = "[" * 100_000 + "]" * 100_000
# id: (column, its values in the one record, their Arrow type (None: inferred), what the one line says)
MALFORMED = {
    "status-as-floats": ("status", [1.0], None, "its column status holds double, where gapfuzz writes string"),
    "backend-as-integers": ("backend", [0], None, "its column backend holds int64, where gapfuzz writes string"),
    "list-column-as-text": ("ops", ['["aten.add.Tensor"]'], None, "its column ops holds string, where gapfuzz writes "
                                                                  "list<"),
    "one-nested-column-as-text": ("backend_options", ['{"a": 1}'], None, "its column backend_options holds string"),
    "node-count-as-text": ("node_count", ["7"], None, "its column node_count holds string, where gapfuzz writes int64"),
    "deep-json-option": ("backend_options", [[{"key": "x", "value": DEEP, "type": "json"}]], "backend_options",
                         "its column backend_options: the key 'x': its json value cannot be read (JSON nested more "
                         "than 64 levels deep)"),
    "number-option-not-json": ("backend_options", [[{"key": "n", "value": "1 2", "type": "int"}]], "backend_options",
                               "its column backend_options: the key 'n': its int value cannot be read"),
    "option-of-no-type": ("backend_options", [[{"key": "t", "value": "1", "type": "tuple"}]], "backend_options",
                          "its column backend_options: the key 't': its type 'tuple' is none of"),
}


def _malformed_run(d: Path, column: str, values: list, type_of) -> Path:
    """A run folder of one failed record (``_write_records``) whose ``column`` a careless or hostile writer
    replaced with ``values``, the file's schema and its gapfuzz_schema_version kept."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from gapfuzz.results.schema import arrow_schema

    path = d / "run" / "records" / "b@cpu" / "part-1.parquet"
    _write_records(path, "RECORDS")
    table = pq.read_table(path)
    array = pa.array(values, arrow_schema().field(type_of).type if type_of else None)
    pq.write_table(table.set_column(table.schema.get_field_index(column), column, array), path)
    return d / "run"


@pytest.mark.parametrize("command", ["triage", "report", "diff", "load_run"])
@pytest.mark.parametrize("case", list(MALFORMED), ids=list(MALFORMED))
def test_a_record_column_of_another_type_is_one_line_naming_the_file_and_the_column(case, command, tmp_path,
                                                                                   monkeypatch):
    """Read as data, a status of floats made a failure cluster vanish and a list column as text was a pyarrow
    traceback; every reader of a run folder refuses the file instead, naming it and the column."""
    from gapfuzz.analysis.api import load_run
    from gapfuzz.results.folder import ResultsError

    column, values, type_of, needle = MALFORMED[case]
    run = _malformed_run(tmp_path, column, values, type_of)
    monkeypatch.chdir(tmp_path)
    if command == "load_run":
        with pytest.raises(ResultsError) as e:
            load_run(run).clusters()
        line = str(e.value)
    else:
        before = _tree(tmp_path)
        argv = {"triage": ["triage", str(run)], "report": ["report", str(run), "--out", str(tmp_path / "r.html")],
                "diff": ["diff", str(run), str(run)]}[command]
        code, err = in_process(argv)
        assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
        assert _tree(tmp_path) == before, "something was written"
        line = err.strip()
    assert "records/b@cpu/part-1.parquet: " in line and needle in line, line


def test_report_draws_names_holding_dollar_signs_as_plain_text(tmp_path, monkeypatch):
    """matplotlib reads ``$...$`` as mathtext; a backend or operator named ``$\\undefinedmacro$`` stopped the
    report with its parse error. Labels are plain text."""
    name = "o$\\undefinedmacro$"
    _write_records(tmp_path / "run" / "records" / "x" / "part-1.parquet", "RECORDS", backend=f"{name}@cpu", stack=name,
                   ops=[f"aten.{name}.default"])
    monkeypatch.chdir(tmp_path)
    code, err = in_process(["report", str(tmp_path / "run"), "--out", str(tmp_path / "r.html")])
    assert code == 0 and err == "", err
    assert "$\\undefinedmacro$" in (tmp_path / "r.html").read_text()
