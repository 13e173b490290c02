"""`coordinator-mirror run` (`streaming.app.run_cmd`): a flag per setting, typed from the model, with
its default and environment variable in ``--help``; flags read into the settings (maps repeated as
``KEY=VALUE``, lists repeated, booleans spelled as people do, over ``--config``); a client option
Kafka refuses stops the command at start naming it.  Stop signals: test_run_cmd_stop_signals.py."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from streaming.app.run_cmd import (
    FILE_ONLY,
    _bool,
    add_settings_arguments,
    kv_pair,
    setting_help,
    settings_from_args,
)
from streaming.settings import Settings, SettingsError
from tests.support.processes import run_cli


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="run")
    add_settings_arguments(parser)
    return parser.parse_args(list(argv))


def test_run_help_names_every_setting_with_its_default_and_environment_variable() -> None:
    parser = argparse.ArgumentParser(prog="run", formatter_class=argparse.RawTextHelpFormatter)
    add_settings_arguments(parser)
    text = parser.format_help()
    for name in Settings.model_fields:
        if name in FILE_ONLY:  # a list of maps: the settings file or CM_<NAME> (JSON) only
            assert "--" + name.replace("_", "-") not in text, name
            continue
        assert "--" + name.replace("_", "-") in text, name
        assert f"env CM_{name.upper()}]" in text, name
    assert '[default: "__consumer_offsets"; env CM_TOPIC]' in text
    assert "[default: 5000000; env CM_MAX_OFFSETS_PER_TRIGGER]" in text
    assert "env CM_CONFIG_FILE" in text


@pytest.mark.spark
@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["request.timeout.ms=soon"], "kafka_options: request.timeout.ms: invalid value soon"),
        (
            ["security.protocol=SASL_SSL", "sasl.mechanism=OAUTHBEARER",
             "sasl.login.callback.handler.class=com.example.NoSuchHandler"],
            "kafka_options: sasl.login.callback.handler.class: class com.example.NoSuchHandler is not on the "
            "class path",
        ),
    ],
)  # fmt: skip
def test_run_stops_at_start_on_a_client_option_kafka_refuses(options: list[str], message: str) -> None:
    """Kafka's own client judges the options (no translation): one it refuses stops `run` at start,
    before any query, with exit 2, naming the setting and the option -- no traceback."""
    argv = ["run", "--bootstrap-servers", "127.0.0.1:1"]
    for option in options:
        argv += ["--kafka-options", option]
    done = run_cli(*argv)
    assert done.returncode == 2, done.stderr
    assert f"coordinator-mirror: {message}" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("text", "pair"),
    [("a=b", ("a", "b")), ("sasl.jaas.config=x=y;z", ("sasl.jaas.config", "x=y;z")), ("k=", ("k", ""))],
)
def test_kv_pair_splits_at_the_first_equals(text: str, pair: tuple[str, str]) -> None:
    assert kv_pair(text) == pair


@pytest.mark.parametrize("text", ["novalue", "=v", ""])
def test_kv_pair_refuses_what_is_not_a_pair(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="expected KEY=VALUE"):
        kv_pair(text)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1", True),
        ("true", True),
        ("YES", True),
        ("On", True),
        ("0", False),
        ("false", False),
        ("no", False),
        ("OFF", False),
    ],
)
def test_booleans_as_people_spell_them(text: str, value: bool) -> None:
    assert _bool(text) is value


def test_a_boolean_flag_with_another_word_is_refused() -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="expected true/false, got 'maybe'"):
        _bool("maybe")


def test_flags_become_settings_over_the_file(tmp_path: Path) -> None:
    config = tmp_path / "settings.json"
    config.write_text(
        json.dumps({"bootstrap_servers": "file:9092", "cluster_name": "from-file", "http_port": 1})
    )
    s = settings_from_args(
        _parse(
            "--config", str(config),
            "--bootstrap-servers", "flag:9092",
            "--kafka-options", "security.protocol=SASL_SSL",
            "--kafka-options", "sasl.mechanism=SCRAM-SHA-512",
            "--kafka-client-java-options=-Da=1",
            "--kafka-client-java-options=-Db=2",
            "--http-open-probes", "no",
            "--trigger-interval-s", "2.5",
            "--events-path", str(tmp_path / "events"),
            "--lag-isolation", "read_uncommitted",
        )
    )  # fmt: skip
    assert s.bootstrap_servers == "flag:9092"  # the flag over the file
    assert s.cluster_name == "from-file" and s.http_port == 1  # the file where no flag
    assert s.kafka_options == {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512"}
    assert s.kafka_client_java_options == ["-Da=1", "-Db=2"]
    assert s.http_open_probes is False and s.trigger_interval_s == 2.5
    assert s.events_path == tmp_path / "events" and s.lag_isolation == "read_uncommitted"


def test_a_choice_outside_the_models_literal_is_refused_by_the_parser(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as info:
        _parse("--lag-isolation", "dirty")
    assert info.value.code == 2
    assert "invalid choice: 'dirty'" in capsys.readouterr().err


def test_an_invalid_setting_is_the_models_error_naming_it() -> None:
    with pytest.raises(SettingsError, match="trigger_interval_s"):
        settings_from_args(_parse("--bootstrap-servers", "h:1", "--trigger-interval-s", "-1"))


def test_a_help_text_with_a_percent_sign_survives_argparse() -> None:
    field = Settings.model_fields["bootstrap_servers"]
    text = setting_help("bootstrap_servers", field)
    assert "env CM_BOOTSTRAP_SERVERS]" in text
    fake = type("F", (), {"description": "50% of the heap", "get_default": lambda self, **_: None})()
    assert setting_help("x", fake) == "50%% of the heap [default: null; env CM_X]"
