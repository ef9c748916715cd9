"""Unknown settings: a key in aptix.toml stops start-up, an APTIX_* variable gets a warning."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from aptix.errors import ConfigurationError
from aptix.settings import AptixSettings, load_settings, unknown_variables


def test_an_unknown_toml_key_is_a_configuration_error_naming_the_nearest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "aptix.toml"
    config.write_text('llm_modle = "gpt-4o-mini"\n')
    monkeypatch.setenv("APTIX_CONFIG_FILE", str(config))
    with pytest.raises(ConfigurationError) as caught:
        load_settings()
    assert caught.value.one_line().startswith(
        f"{config}: unknown setting 'llm_modle'. Did you mean llm_model?"
    )
    config.write_text('zzz = "far from everything"\n')
    with pytest.raises(ConfigurationError, match=r"unknown setting 'zzz'\.$"):
        AptixSettings()


def test_unknown_variables_are_derived_from_the_settings_model() -> None:
    environ = {
        "APTIX_LLM_MODLE": "x",
        "APTIX_LLM_MODEL": "x",
        "APTIX_CONFIG_FILE": "x",
        "APTIX_TEST_PG_HOST": "x",
        "APTIX_SOMETHING_ELSE": "x",
        "OTHER": "x",
    }
    assert unknown_variables(environ) == [
        "APTIX_LLM_MODLE is not an Aptix setting and is ignored. Did you mean APTIX_LLM_MODEL?",
        "APTIX_SOMETHING_ELSE is not an Aptix setting and is ignored.",
    ]
    every = {f"APTIX_{name.upper()}": "x" for name in AptixSettings.model_fields}
    assert unknown_variables(every) == []  # a setting added later is known without a list


def test_aptix_serve_stops_on_llm_modle_and_warns_on_an_unknown_variable(tmp_path: Path) -> None:
    (tmp_path / "aptix.toml").write_text('llm_modle = "gpt-4o-mini"\n')
    env = {k: v for k, v in os.environ.items() if k != "APTIX_CONFIG_FILE"}
    env.update(APTIX_DATA_DIR=str(tmp_path / "data"), APTIX_LLM_MODLE="x")
    done = subprocess.run(
        [sys.executable, "-m", "aptix", "serve", "--port", "0"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert lines == [
        "APTIX_LLM_MODLE is not an Aptix setting and is ignored. Did you mean APTIX_LLM_MODEL?",
        "error: aptix.toml: unknown setting 'llm_modle'. Did you mean llm_model? — "
        "docs/settings.md lists every setting (the variable names in lower case)",
    ]
