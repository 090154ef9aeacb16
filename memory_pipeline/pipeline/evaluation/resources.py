"""The evaluation resource: the golden set, and where runs and the baseline are kept."""

from pathlib import Path

import dagster as dg

from memory_pipeline.evaluation import EvalRun, evaluate_golden
from memory_pipeline.system import MemorySystem

LATEST = "latest.json"
BASELINE = "baseline.json"  # the last run that passed the regression gate


class EvaluationResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """``memory_pipeline.evaluation`` against the configured golden set.

    Runs are kept as JSON under ``reports_dir`` (one per run, plus ``latest.json``);
    ``baseline.json`` is the last run that passed the regression check.
    """

    golden_file: str | None = None
    reports_dir: str | None = None  # default: reports/ beside the golden set

    def golden(self) -> Path | None:
        """The golden set's path, or None when none is configured or it does not exist."""
        if not self.golden_file or not Path(self.golden_file).is_file():
            return None
        return Path(self.golden_file)

    def folder(self) -> Path:
        if self.reports_dir:
            return Path(self.reports_dir)
        return Path(self.golden_file or "eval/golden.yaml").parent / "reports"

    def evaluate(
        self, system: MemorySystem, k_values: list[int], variants: list[str] | None
    ) -> EvalRun:
        golden = self.golden()
        if golden is None:
            raise dg.Failure(
                f"no golden set at {self.golden_file!r}: set MEMORY_PIPELINE_GOLDEN to a YAML "
                "golden set (copy eval/golden_queries.example.yaml and fill in your queries)"
            )
        return evaluate_golden(system, golden, k_values, variants=variants)

    def save(self, run: EvalRun) -> Path:
        folder = self.folder()
        folder.mkdir(parents=True, exist_ok=True)
        stamp = run.created_at.replace(":", "").replace("+0000", "Z")
        path = folder / f"{run.dataset}-{stamp}.json"
        run.save(path)
        run.save(folder / LATEST)
        return path

    def _load(self, name: str) -> EvalRun | None:
        path = self.folder() / name
        return EvalRun.load(path) if path.exists() else None

    def latest(self) -> EvalRun | None:
        return self._load(LATEST)

    def baseline(self) -> EvalRun | None:
        return self._load(BASELINE)

    def promote(self, run: EvalRun) -> None:
        """Make ``run`` the baseline the next runs are gated against."""
        self.folder().mkdir(parents=True, exist_ok=True)
        run.save(self.folder() / BASELINE)
