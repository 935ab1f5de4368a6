"""The notebook API: ``run = load_run("runs/x")``, then DataFrames for every triage question.

Columns are read from Parquet only when a table needs them (a million-record campaign
clusters without reading its recipes), list columns stay Arrow-backed (no Python object
per operator name), nested columns are their values (``results.columns``: a recipe, an options
mapping; the same from a folder that holds them as JSON text), and nothing here imports torch.
"""
from __future__ import annotations

from functools import cached_property
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from gapfuzz.core.bugs import DEFAULT_ORACLE, DEFAULT_REFERENCE, Kind, Status, Verdict
from gapfuzz.core.ids import BackendName
from gapfuzz.core.strict_yaml import YamlError, load
from gapfuzz.results.catalog import Catalog
from gapfuzz.results.columns import NESTED, decode_column
from gapfuzz.results.folder import Folder
from gapfuzz.results.manifest import RunManifest
from gapfuzz.results.schema import COLUMNS
from gapfuzz.results.store import RecordStore, ResultsError, check_version

from . import clusters as _clusters
from . import option_cover as _cover
from . import portability as _port
from . import releases as _releases
from .impact import catalog_models
from .known import KnownIssues
from .merge import minimised
from .triage import status_summary

CLUSTER_COLUMNS = _clusters.USED
TABLE_COLUMNS = ["seed_source", "latency_ms", "tol_needed"]


def _mapper(t: pa.DataType):
    return pd.ArrowDtype(t) if pa.types.is_list(t) else None


def _frame(table: pa.Table) -> pd.DataFrame:
    """Records as a DataFrame: a nested column as one Python value per row (rows alike share one)."""
    nested = [c for c in table.column_names if c in NESTED]
    df = table.drop_columns(nested).to_pandas(types_mapper=_mapper)
    for c in nested:
        df[c] = pd.Series(decode_column(c, table.column(c)), index=df.index, dtype=object)
    return df[table.column_names]


class Run:
    """A run folder: its campaign settings and its records, read lazily and cached. ``known``: a
    known-issues file (``analysis.known``) that marks clusters; ``catalog``: a folder with a seed
    catalog (``gapfuzz seeds scan``) to rate each cluster's impact against, else the run's own."""

    def __init__(self, path: str | Path, known: str | Path | None = None, catalog: str | Path | None = None):
        self.folder = Folder(path)  # a local folder, or one on any filesystem pyarrow reads (s3://...)
        if not self.folder.is_dir():
            raise ResultsError(f"{path}: no such run folder")
        self.path = self.folder.local_path  # None on an object store: no reproducers there
        self.store = RecordStore(self.folder)
        if not self.store.files():
            raise ResultsError(f"{path}: holds no records (is it a gapfuzz run folder?)")
        self.campaign = self._campaign()
        self.manifest = RunManifest.read(self.folder)
        if self.manifest is not None:  # the names as the driver resolved them
            self.name, self.reference, self.oracle = self.manifest.campaign, self.manifest.reference, \
                self.manifest.oracle
            self.sweep = self.manifest.compare.get("sweep")
        else:  # a folder written before run.json: its campaign file, defaults as the driver's
            backends = self.campaign.get("backends")
            backends = backends if isinstance(backends, dict) else {}
            self.name = self.campaign.get("name") or self.folder.name
            self.oracle = _entry_name(backends, "oracle", DEFAULT_ORACLE)
            if self.oracle is None and backends.get("oracle") is not None:  # not ``oracle: null``: a plug-in's
                self.oracle = self._in_records("oracle")
            self.reference = _entry_name(backends, "reference", DEFAULT_REFERENCE) or \
                self._in_records("reference") or DEFAULT_REFERENCE
            compare = self.campaign.get("compare")
            self.sweep = compare.get("sweep") if isinstance(compare, dict) else None
        self._frame = pd.DataFrame()
        self._support: dict = {}
        self.known = KnownIssues.load(known)
        if catalog is not None and not Catalog(catalog).files():
            raise ResultsError(f"{catalog}: holds no seed catalog (gapfuzz seeds scan --out {catalog} writes one)")
        self.catalog_dir = catalog if catalog is not None else self.folder

    def _campaign(self) -> dict:
        f = f"{self.folder}/campaign.yaml"
        try:
            if not self.folder.exists("campaign.yaml"):
                return {}
            given = load(self.folder.read_bytes("campaign.yaml"), f)
        except YamlError as e:
            raise ResultsError(str(e)) from None
        except OSError as e:
            raise ResultsError(f"{f}: cannot read: {e.strerror or e}") from None
        if not isinstance(given, dict):
            raise ResultsError(f"{f}: not a campaign file: a mapping of keys is expected")
        return given

    def _in_records(self, role: str) -> str | None:
        """An old folder's reference or oracle that its campaign file names by an unlabelled plug-in class:
        the backend of the oracle's verdicts, or the reference's (no verdict on a run that completed, and
        the backend of a seed that failed before it was mutated)."""
        df = self.store.read(["backend", "status", "verdict", "variant_id"]).to_pandas()
        if role == "oracle":
            found = df.loc[df["verdict"] == Verdict.ORACLE, "backend"]
        else:
            seed_failed = df["variant_id"].str.endswith("#seed").fillna(False)
            own = df["verdict"].isna() & (df["status"] == Status.OK) | seed_failed
            found = df.loc[own & (df["backend"] != self.oracle), "backend"]
        return str(found.mode().iloc[0]) if len(found) else None

    def __repr__(self) -> str:
        return f"Run({str(self.folder)!r}, records={len(self)}, reference={self.reference!r})"

    def __len__(self) -> int:
        return self.store.count()

    # -- records
    def records(self, columns: list[str] | None = None) -> pd.DataFrame:
        """The records (all columns, or the ones named), one row per (variant, backend)."""
        columns = list(columns or COLUMNS)
        unknown = sorted(set(columns) - set(COLUMNS))
        if unknown:
            raise ResultsError(f"unknown record columns: {', '.join(unknown)}")
        missing = [c for c in columns if c not in self._frame.columns]
        if missing:
            table = self.store.read(missing if "schema_version" in missing else [*missing, "schema_version"])
            check_version(table)
            part = _frame(table)
            self._frame = part if self._frame.empty else pd.concat(
                [self._frame, part.drop(columns=[c for c in part if c in self._frame])], axis=1)
        return self._frame[columns]

    def catalog(self) -> pd.DataFrame:
        """The seed catalog (one row per seed the campaign built, or of the catalog folder given)."""
        return Catalog(self.catalog_dir).read().to_pandas(types_mapper=_mapper)

    def catalog_models(self) -> int:
        """How many model seeds the catalog that rates impact holds (what an impact figure is out of)."""
        return catalog_models(self.catalog())

    def status_summary(self) -> pd.DataFrame:
        return status_summary(self.records(["backend", "status"]))

    # -- clusters
    @cached_property
    def _prepared(self) -> pd.DataFrame:
        """The clustering columns by position, with inherited locations and option explanations."""
        return _clusters.prepared(self.records(CLUSTER_COLUMNS))

    @cached_property
    def _keys(self) -> pd.DataFrame:
        return _clusters.keys(self._prepared)

    @cached_property
    def _cluster_ids(self) -> pd.Series:
        return self._keys["cluster"].set_axis(self.records(["backend"]).index)

    @cached_property
    def _clusters(self) -> pd.DataFrame:
        c = _clusters.clusters(self._prepared, self.reference, self.oracle, self.catalog(),
                               minimised(self.path / "repros") if self.path else {}, self.backends)
        c["known"] = self.known.match(c)
        return c

    def clusters(self, kind: str | None = None, vendor: bool | None = None, benign: bool = False,
                 mark: str | None = None) -> pd.DataFrame:
        """Crash and discrepancy clusters in triage order (``analysis.clusters.order``); filter by kind,
        vendor flag or release mark (``analysis.releases.Mark``: ``regression``...); ``benign`` clusters
        (differences explained without a defect) only when asked."""
        c = self._clusters
        if mark is not None:
            c = c[c["release_mark"] == mark]
        if kind is not None:
            c = c[c["kind"] == kind]
        elif not benign:
            c = c[c["kind"] != Kind.BENIGN]
        if vendor is not None:
            c = c[c["vendor"] == vendor]
        return c.reset_index(drop=True)

    def benign_runs(self) -> int:
        """How many runs differ without a defect (the benign clusters' runs)."""
        c = self._clusters
        return int(c.loc[c["kind"] == Kind.BENIGN, "count"].sum())

    def cluster(self, cluster_id: str, columns: list[str] | None = None) -> pd.DataFrame:
        """The records of one cluster (an id or a unique prefix of one, merged clusters' too), the runs that
        located their divergence themselves first, then smallest graph first."""
        ids = self._clusters["cluster"]
        match = ids[ids.str.startswith(cluster_id)].tolist() if cluster_id else []
        if len(match) != 1:
            raise ResultsError(f"{cluster_id!r}: " + ("no such cluster in this run" if not match
                               else f"matches {len(match)} clusters: {', '.join(match[:5])}"))
        merged = self._clusters.loc[ids == match[0], "merged"].iloc[0]
        mask = self._cluster_ids.isin([match[0], *merged]).fillna(False).to_numpy()
        rows = self.records(columns)[mask].copy()
        for c in ("first_div_op", "explanation", "verdict", "consensus", "node_symptom", "culprit"):  # as keyed
            if c in rows.columns:
                rows[c] = self._prepared[c].to_numpy()[mask]
        nodes = pd.to_numeric(self.records(["node_count"])["node_count"].loc[rows.index], errors="coerce")
        located = self._prepared["op_inherited"].to_numpy()[mask]  # runs that located their own divergence first
        order = pd.DataFrame({"inherited": located, "nodes": nodes.to_numpy()}, index=rows.index)
        return rows.loc[order.sort_values(["inherited", "nodes"], kind="stable").index]

    def why(self, cluster_id: str) -> str:
        """Why the runs of one cluster are one bug (``gapfuzz triage --why``, ``analysis.why``): its key's
        fields, what the key folded, what its runs differ in, and the clusters it keeps apart."""
        from .why import render_why

        rows = self.cluster(cluster_id)
        ids = self._clusters["cluster"]
        cluster = self._clusters.loc[ids.str.startswith(cluster_id)].iloc[0]
        return render_why(cluster, rows, self._keys, self._prepared)

    # -- portability
    def _tables(self) -> pd.DataFrame:
        return self.records(CLUSTER_COLUMNS + TABLE_COLUMNS)

    @cached_property
    def _ops(self) -> pa.ChunkedArray:
        """The op lists, read dictionary-encoded (4x faster than strings, a fraction of the memory), from the
        files the store has checked."""
        try:
            return pq.read_table(self.store.files(), columns=["ops"], read_dictionary=["ops.list.element"],
                                 filesystem=self.store.folder.fs).column("ops")
        except (pa.ArrowException, OSError) as e:
            raise ResultsError(f"{self.store.records_dir}: cannot read the column ops: "
                               f"{' '.join(str(e).split())[:300]}") from None

    def support(self, by: str | None = None) -> pd.DataFrame:
        """Long table: op, backend, attempts, completed, share, supported (see ``analysis.portability``)."""
        if by not in self._support:
            self._support[by] = _port.support(self._tables(), by, self._ops)
        return self._support[by].copy()

    def support_matrix(self, value: str = "share", ops_only: bool = False) -> pd.DataFrame:
        """Operator x backend; ``ops_only``: evidence from single-operator seeds only."""
        if not ops_only:
            return _port.support_matrix(self.support(), value)
        df = self._tables()
        mask = (df["seed_source"] == "ops").to_numpy()
        return _port.support_matrix(_port.support(df[mask], ops=self._ops.filter(pa.array(mask))), value)

    def portability(self, by: str | None = None) -> pd.DataFrame:
        return _port.seeds(self._tables(), self.reference, by, self.support(by))

    def slowdowns(self) -> pd.DataFrame:
        return _port.slowdowns(self._tables(), self.reference)

    def slowdown_summary(self, by: str | None = None) -> pd.DataFrame:
        return _port.slowdown_summary(self._tables(), self.reference, by)

    def tolerance_curve(self, tolerances=None, by: str | None = None) -> pd.DataFrame:
        return _port.tolerance_curve(self._tables(), tolerances, by)

    def divergence(self, by: str | None = None) -> pd.DataFrame:
        return _port.divergence(self._tables(), self.reference, by)

    # -- option spaces and releases
    @property
    def backends(self) -> dict:
        """run.json's backends: name -> its entry (``results.manifest``); none in a folder written before it."""
        return self.manifest.backends if self.manifest is not None else {}

    def release_lines(self) -> dict:
        """line -> its releases, oldest first, for each stack the run ran in several (``analysis.releases``)."""
        return _releases.lines(self.backends)

    def option_spaces(self) -> dict:
        """backend -> its option space, for the targets that had one (from ``run.json``; none before it)."""
        backends = self.backends
        return {b: e["option_space"] for b, e in backends.items() if isinstance(e, dict) and e.get("option_space")}

    def option_coverage(self, by=("seed_id", "mode")) -> pd.DataFrame:
        """Per target with an option space and per ``by`` (seed and mode; ``("mode",)``: the whole run):
        the pairs of option values its records ran, out of the pairs in the space (``analysis.option_cover``)."""
        return _cover.pair_coverage(self.records(_cover.COLUMNS), self.option_spaces(), by)


def _entry_name(backends: dict, role: str, default: str) -> str | None:
    """The record name of a campaign's ``reference`` or ``oracle`` entry: ``stack@device``, or
    ``label@device`` for the dict form (``{backend: eager@cpu, label: ref}``); ``default`` when the file
    names none; None for ``oracle: null``, and for a plug-in class without a label, whose name only
    importing it would tell (``Run._in_records`` finds it)."""
    if role not in backends:
        return default
    entry = backends[role]
    if isinstance(entry, str):
        return entry
    if isinstance(entry, dict) and (entry.get("label") or entry.get("backend")):
        name = BackendName.loose(entry.get("backend") or "")
        return str(BackendName(entry.get("label") or name.stack, entry.get("device") or name.device or "cpu"))
    return None


def load_run(path: str | Path, known: str | Path | None = None, catalog: str | Path | None = None) -> Run:
    """Open a run folder (``runs/<name>``); a bad folder is one clear ResultsError line."""
    return Run(path, known, catalog)
