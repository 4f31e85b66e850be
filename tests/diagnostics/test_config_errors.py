"""A config error inside a file names the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from mlgoodput.diagnostics._configs import load_configs


def test_a_bad_value_in_a_file_names_the_file(tmp_path: Path) -> None:
    pytest.importorskip("yaml")
    f = tmp_path / "train.yaml"
    f.write_text("start: 2024-01-02\nlr: 0.1\n")  # YAML reads the date as a datetime.date
    with pytest.raises(TypeError, match=r"train\.yaml.*\['start'\]"):
        load_configs(str(f))
    assert load_configs({"lr": 0.1}) == {"lr": 0.1}
