"""A compiler answers to eager on its own device, eager on a device to eager on the host, and TF32 is
the platform's setting: off unless asked, recorded per run, and a divergence it causes is explained,
never a finding (``workers.judge.comparisons``, ``workers.run.platform``)."""
from __future__ import annotations

import pytest

from gapfuzz.core.bugs import Explanation, Verdict
from gapfuzz.core.strict_yaml import load
from gapfuzz.fuzzer.config.campaign import CampaignError, from_dict
from gapfuzz.workers.judge.comparisons import DIVERGED
from tests.conftest import run_campaign

P = "tests.stacks.platform_backends"
DEVICE = f"""
name: platform
seed: 0
seeds:
  - {{source: ops, include: ["ops/mm/float32/0", "ops/sum/float32/0"]}}
variants: {{per_seed: 1}}
sizes: {{per_seed: 0, widths: 0}}
probes: {{per_variant: 1}}
compare: {{bisect: false}}
backends:
  reference: {{class: "{P}:HostEager", device: cpu}}
  targets: [{{class: "{P}:NpuCompiler", device: npu}}, {{class: "{P}:FaultyNpuCompiler", device: npu}}]
  device_reference: DEVICE_REFERENCE
pools: {{cpu: {{workers: 1}}, npu: {{workers: 1}}}}
run: {{repeats: 1}}
"""


def _campaign(text: str):
    return from_dict(load(text, "t"), "t")


def test_a_compiler_on_another_device_gets_eager_there_as_its_reference_added_once():
    c = _campaign(DEVICE.replace("DEVICE_REFERENCE", "true"))
    assert c.backends.device_references == {"npu": "host-eager@npu"}
    assert [t.name for t in c.backends.targets].count("host-eager@npu") == 1
    off = _campaign(DEVICE.replace("DEVICE_REFERENCE", "false"))
    assert off.backends.device_references == {} and "host-eager@npu" not in [t.name for t in off.backends.targets]
    named = _campaign(DEVICE.replace("DEVICE_REFERENCE", "true").replace(
        "targets: [", f'targets: [{{class: "{P}:HostEager", device: npu}}, '))
    assert [t.name for t in named.backends.targets].count("host-eager@npu") == 1


def test_tf32_is_a_platform_option_checked_as_a_boolean():
    text = DEVICE.replace("DEVICE_REFERENCE", "true").replace(
        f'{{class: "{P}:NpuCompiler", device: npu}}',
        f'{{class: "{P}:NpuCompiler", device: npu, options: {{tf32: maybe}}}}')
    with pytest.raises(CampaignError, match=r"targets\[0\]\.options: tf32: expected true or false, got 'maybe'"):
        _campaign(text)


@pytest.fixture
def npu_ray():
    """An embedded Ray whose node advertises two fake Ascend NPUs, under Ray's own name for them."""
    import ray

    ray.shutdown()  # the session's (conftest.local_ray), if it runs: this node needs its own resources
    ray.init(num_cpus=2, resources={"NPU": 2}, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    yield
    ray.shutdown()


@pytest.mark.ray
@pytest.mark.parametrize("device_reference", [True, False])
def test_a_compiler_fault_is_the_compilers_and_what_eager_on_its_device_does_is_the_platforms(
        npu_ray, tmp_path, device_reference):
    """Judged against eager on the npu (the default) or against the host with eager on the npu beside it:
    the npu's own rounding is the platform's finding, never a compiler's; the wrong sum is the faulty
    compiler's."""
    text = DEVICE.replace("DEVICE_REFERENCE", str(device_reference).lower())
    if not device_reference:
        text = text.replace("targets: [", f'targets: [{{class: "{P}:HostEager", device: npu}}, ')
    df = run_campaign(text, tmp_path).records()
    op = df["seed_id"].str.split("/").str[1]
    platform = df[df["backend"] == "host-eager@npu"]
    compiler, faulty = df[df["backend"] == "npu-compiler@npu"], df[df["backend"] == "faulty-npu-compiler@npu"]
    assert len(platform) and len(compiler) and len(faulty)
    assert (platform["judged_against"] == "host-eager@cpu").all()  # the platform's comparison
    assert (platform.loc[op == "mm", "verdict"] == Verdict.TARGET_DIVERGENT).any()
    assert (platform.loc[op == "sum", "verdict"] == Verdict.AGREE).all()
    if device_reference:
        assert (compiler["judged_against"] == "host-eager@npu").all() and (compiler["verdict"] == Verdict.AGREE).all()
        assert (faulty.loc[op == "mm", "verdict"] == Verdict.AGREE).all()
    else:
        assert (compiler["judged_against"] == "host-eager@cpu").all()
        for rows in (compiler[op == "mm"], faulty[op == "mm"]):
            apart = rows[rows["verdict"].isin([Verdict.TARGET_DIVERGENT, Verdict.REFERENCE_SUSPECT])]
            assert len(apart) and (apart["explanation"] == Explanation.PLATFORM).all(), apart[["verdict", "probe"]]
    wrong_sum = faulty[(op == "sum") & (faulty["verdict"] != Verdict.AGREE)]
    assert len(wrong_sum) and (wrong_sum["verdict"] == Verdict.TARGET_DIVERGENT).all()
    assert wrong_sum["explanation"].isna().all()
    vendor = run_campaign_clusters(tmp_path)
    backends = {b for bs in vendor["backends"] for b in bs}
    assert backends == {"faulty-npu-compiler@npu", "host-eager@npu"}, vendor[["backends", "ops"]]


def run_campaign_clusters(folder):
    from gapfuzz.analysis.api import load_run

    return load_run(folder).clusters(vendor=True)


TF32 = f"""
name: tf32
seed: 0
seeds:
  - {{source: ops, include: ["ops/mm/float32/0", "ops/nn.functional.linear/float32/0",
                            "ops/nn.functional.conv2d/float32/0"]}}
variants: {{per_seed: 1}}
sizes: {{per_seed: 0, widths: 0}}
probes: {{per_variant: 1}}
compare: {{bisect: false}}
backends:
  targets: [{{class: "{P}:Tf32Rounding", device: cpu, label: tf32-on, options: {{tf32: true}}}},
            {{class: "{P}:Tf32Rounding", device: cpu, label: tf32-off}}]
pools: {{cpu: {{workers: 2}}}}
run: {{repeats: 1}}
"""


@pytest.mark.ray
def test_a_stack_rounding_to_tf32_has_every_divergence_explained_and_none_with_tf32_off(local_ray, tmp_path):
    run = run_campaign(TF32, tmp_path)
    df = run.records()
    on, off = df[df["backend"] == "tf32-on@cpu"], df[df["backend"] == "tf32-off@cpu"]
    assert on["tf32"].all() and not off["tf32"].any() and len(on) == len(off) > 0
    assert not off["verdict"].isin(list(DIVERGED)).any()  # the executor leaves TF32 off unless asked
    divergent = on[on["verdict"].isin(list(DIVERGED))]
    assert len(divergent), "TF32 rounding past TF32's tolerance should show somewhere"
    assert (divergent["explanation"] == Explanation.TF32).all(), divergent[["seed_id", "probe", "explanation"]]
    assert run.clusters(vendor=True).empty


def test_tf32_is_set_and_restored_even_after_torch_disables_its_global_flags():
    """PyTorch's test harness calls ``torch.backends.disable_global_flags()``; a run must still set TF32."""
    import subprocess
    import sys

    code = ("import torch; torch.backends.disable_global_flags()\n"
            "from gapfuzz.workers.run.platform import Precision\n"
            "with Precision(True).applied():\n"
            "    print(torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)\n"
            "with Precision(False).applied(): print(torch.backends.cudnn.allow_tf32)\n"
            "print(torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "True", "False", "True", "False"]  # on, off, then PyTorch's defaults again
