"""[tracing] and the rule that turns tracing on: the table decides when present, else the OTEL_* variables;
a bad value is named FILE: tracing.KEY: reason; off, nothing of tracing is imported or started."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Final

import pytest
from support import ROOT

from actors.config import ConfigError, load_config
from actors.config.diff import diff
from actors.config.tracing_schema import TracingSettings
from actors.telemetry.tracing_switch import tracing_wanted

# what a gateway that does not trace may import of tracing: its config, the on/off rule, the attribute names
PURE: Final = {
    "actors.config.tracing_schema",
    "actors.telemetry.tracing_switch",
    "actors.telemetry.tracing_attributes",
}
BACKEND: Final = '[[backends]]\nname = "a"\ncommand = "python3"\n'


def config_with(tmp_path: Path, tracing: str, name: str = "gateway.toml") -> Path:
    path = tmp_path / name
    path.write_text(BACKEND + tracing, encoding="utf-8")
    return path


def test_tracing_is_off_by_default_and_on_by_the_table_or_an_endpoint_variable() -> None:
    assert not tracing_wanted(None, {})
    assert tracing_wanted(TracingSettings(), {})
    assert not tracing_wanted(
        TracingSettings(enabled=False), {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}
    )
    assert tracing_wanted(None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"})
    assert tracing_wanted(None, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"})
    assert not tracing_wanted(None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "  "})
    assert not tracing_wanted(
        None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}
    )


def test_every_bad_tracing_value_is_named_by_file_and_key(tmp_path: Path) -> None:
    path = config_with(
        tmp_path,
        '[tracing]\nenabled = "yes"\nendpoint = "ftp://collector"\nsample_ratio = 1.5\n'
        'export_timeout_s = 0\nservice_name = " "\ncolour = "blue"\n'
        'protocol = "grpc"\ncompression = "zstd"\n',
    )
    with pytest.raises(ConfigError) as failed:
        load_config(path)
    problems = {problem.key: problem.reason for problem in failed.value.problems}
    assert {problem.file for problem in failed.value.problems} == {str(path)}
    assert set(problems) == {
        "tracing.enabled",
        "tracing.endpoint",
        "tracing.sample_ratio",
        "tracing.export_timeout_s",
        "tracing.service_name",
        "tracing.colour",
        "tracing.protocol",
        "tracing.compression",
    }
    assert "http:// or https://" in problems["tracing.endpoint"]
    assert "must be http/protobuf" in problems["tracing.protocol"] and "grpc" in problems["tracing.protocol"]
    assert problems["tracing.compression"] == "must be gzip or none"
    assert "between 0 and 1" in problems["tracing.sample_ratio"]


def test_an_export_timeout_past_a_day_is_refused_by_file_and_key(tmp_path: Path) -> None:
    # 1e10 s: more than a socket's timeout can hold; it once ended the export thread at its first post
    with pytest.raises(ConfigError) as failed:
        load_config(config_with(tmp_path, "[tracing]\nexport_timeout_s = 1e10\n"))
    assert [(problem.key, problem.reason) for problem in failed.value.problems] == [
        ("tracing.export_timeout_s", "must be greater than 0 and at most 86400 (a day)")
    ]
    assert load_config(config_with(tmp_path, "[tracing]\nexport_timeout_s = 86400\n")).tracing == (
        TracingSettings(export_timeout_s=86400.0)
    )


@pytest.mark.parametrize(
    "endpoint",
    [
        "http://collector:4318\nX-Evil: 1",  # a header smuggled into a URL
        "http://collector:4318/\x00",
        "http://collector:99999",
        "http://",
        "http://collector:4318/?x=1",
        "http://" + "c" * 3000,
    ],
)
def test_an_endpoint_with_control_characters_a_bad_port_or_no_host_is_refused(
    tmp_path: Path, endpoint: str
) -> None:
    escaped = endpoint.replace("\\", "\\\\").replace("\n", "\\n").replace("\x00", "\\u0000")
    with pytest.raises(ConfigError) as failed:
        load_config(config_with(tmp_path, f'[tracing]\nendpoint = "{escaped}"\n'))
    assert [problem.key for problem in failed.value.problems] == ["tracing.endpoint"]


def test_a_good_tracing_table_loads_and_a_change_to_it_needs_a_restart(tmp_path: Path) -> None:
    before = load_config(config_with(tmp_path, "", "plain.toml"))
    after = load_config(
        config_with(tmp_path, '[tracing]\nendpoint = "https://collector.example:4318"\nsample_ratio = 0.25\n')
    )
    assert after.tracing == TracingSettings(endpoint="https://collector.example:4318", sample_ratio=0.25)
    assert "[tracing]" in diff(before, after).needs_restart


def test_a_gateway_that_does_not_trace_imports_no_tracing_module_and_starts_no_thread(tmp_path: Path) -> None:
    path = config_with(tmp_path, "")
    probe = (
        "import sys, trio\n"
        "from actors.config import load_config\n"
        "from actors.gateway import Gateway\n"
        "import actors.cli\n"
        f"gateway = Gateway(load_config({str(path)!r}))\n"
        "assert not gateway.traced and gateway.tracing is None\n"
        "print(sorted(name for name in sys.modules if 'opentelemetry' in name or 'tracing' in name))\n"
        "import threading; print(threading.active_count())\n"
    )
    env = {"PATH": "/usr/bin:/bin"}  # no OTEL_* variable
    ran = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert ran.returncode == 0, ran.stderr
    modules, threads = ran.stdout.rsplit("\n", 2)[:2]
    assert not [name for name in eval(modules) if "opentelemetry" in name]  # our own output
    assert set(eval(modules)) <= PURE  # the span machinery and its export thread stay out
    assert threads == "1"


def test_the_examples_commented_out_tracing_table_is_valid(tmp_path: Path) -> None:
    lines = (ROOT / "config" / "example.toml").read_text(encoding="utf-8").splitlines()
    start = lines.index("# [tracing]")
    block = []
    for line in lines[start:]:
        if not line.startswith("# "):
            break
        block.append(line.removeprefix("# "))
    path = config_with(tmp_path, "\n".join(block) + "\n")
    assert load_config(path).tracing == TracingSettings(
        endpoint="http://127.0.0.1:4318",
        service_name="mcp-gateway",
        sample_ratio=1.0,
        export_timeout_s=10.0,
        compression="none",
    )
