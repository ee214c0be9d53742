"""Issue 33 (1)–(2): hostile results tables are one line, never a traceback — in the library
(``load_atlas_table``) and ``hsc atlas`` (exit 2); the Model atlas page's one ``st.error`` is in
``test_app_robust.py``. Every hostile table is generated here from a valid one."""

from __future__ import annotations

import pytest
from conftest import random_tree

from hsc_core.cli import main
from hsc_core.core.synthetic import synthetic_logits
from hsc_core.evaluation.atlas import duplicated_columns, load_atlas_table
from hsc_core.evaluation.model import ModelEvaluation
from hsc_core.evaluation.results import RESULT_COLUMNS, to_csv, wide_table


@pytest.fixture(scope="module")
def own_rows():
    h = random_tree(12, seed=2)
    rows = []
    for k, name in enumerate(("model_a", "model_b")):
        logits, labels = synthetic_logits(h, n_samples=120, seed=k)
        rows += ModelEvaluation(h, logits, labels, name=name, dataset="imagenet1k").results()
    return rows


def _authors_with_two_architectures() -> str:
    """A table of the authors' header with ``Architecture`` (and ``Accuracy``) twice."""
    header = ["Architecture", "Accuracy", "Temperature", "Architecture", "Accuracy"]
    return ",".join(header) + "\nresnet50,76.1,1.2,resnet50,76.1\n"


def _models_csv(own_rows, n_eval: str, row: int = 1) -> str:
    """``hsc evaluate``'s results_models.csv with model ``row``'s n_eval replaced by ``n_eval``."""
    lines = to_csv(wide_table(own_rows, loss=None)).splitlines()
    header = lines[0].split(",")
    k = header.index("n_eval")
    cells = lines[1 + row].split(",")
    cells[k] = n_eval
    lines[1 + row] = ",".join(cells)
    return "\n".join(lines) + "\n"


def _results_csv(own_rows, n_eval: str) -> str:
    """``hsc evaluate``'s tidy results.csv with the third row's n_eval replaced."""
    lines = to_csv(own_rows, RESULT_COLUMNS).splitlines()
    k = RESULT_COLUMNS.index("n_eval")
    cells = lines[3].split(",")  # the model names and labels hold no comma
    cells[k] = n_eval  # as typed in a spreadsheet (to_csv would guard a leading "-")
    lines[3] = ",".join(cells)
    return "\n".join(lines) + "\n"


def test_duplicated_columns_are_named_in_first_seen_order():
    assert duplicated_columns(["a", "b", "a", "c", "b", "a"]) == ["a", "b"]
    assert duplicated_columns(["a", "b"]) == []


def test_a_duplicated_column_is_one_line_naming_it(tmp_path):
    (tmp_path / "dup.csv").write_text(_authors_with_two_architectures())
    with pytest.raises(ValueError) as exc:
        load_atlas_table(tmp_path / "dup.csv")
    message = str(exc.value)
    assert "\n" not in message
    assert "'Architecture', 'Accuracy'" in message and "more than once" in message
    with pytest.raises(ValueError, match="'model' appear more than once"):
        load_atlas_table(data=b"model,n_eval,model\na,1,a\n", name="up.csv")


@pytest.mark.parametrize("bad", ["inf", "-1", "1e400", "2.5", "-inf"])
def test_a_sample_count_that_is_not_a_whole_number_names_column_and_row(own_rows, bad, tmp_path):
    (tmp_path / "models.csv").write_text(_models_csv(own_rows, bad))
    with pytest.raises(ValueError, match=rf"column 'n_eval' must hold a non-negative whole number of samples; "
                                         rf"row 3 has '{bad}'$"):
        load_atlas_table(tmp_path / "models.csv")
    (tmp_path / "results.csv").write_text(_results_csv(own_rows, bad))
    with pytest.raises(ValueError, match=rf"column 'n_eval' .* row 4 has '{bad}'$"):
        load_atlas_table(tmp_path / "results.csv")


def test_valid_counts_still_load(own_rows, tmp_path):
    (tmp_path / "models.csv").write_text(_models_csv(own_rows, "1e2"))  # a whole number in float notation
    (tmp_path / "plain.csv").write_text(to_csv(wide_table(own_rows, loss=None)))
    want = load_atlas_table(tmp_path / "plain.csv")["n_eval"].tolist()
    assert load_atlas_table(tmp_path / "models.csv")["n_eval"].tolist() == [want[0], 100]


@pytest.mark.parametrize("kind", ["duplicate", "inf", "-1", "1e400"])
def test_cli_exits_2_with_one_line(own_rows, kind, tmp_path, capsys):
    text = _authors_with_two_architectures() if kind == "duplicate" else _models_csv(own_rows, kind)
    (tmp_path / "t.csv").write_text(text)
    assert main(["atlas", str(tmp_path / "t.csv")]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("hsc atlas: error: "), err
    assert ("more than once" if kind == "duplicate" else f"row 3 has '{kind}'") in err[0]
    assert "Traceback" not in captured.out + captured.err
