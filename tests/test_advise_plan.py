"""What advise's plan reads from a kind's registry description (issue 35), not from its name: the
iterative scan a find of pgeval's own setting runs under (HNSW's strict_order; IVFFlat has only
relaxed_order), the setting the note on a rebuilt index names (hnsw-bq: its re-rank candidates),
and the default designs (``Kind.advise_default``: a new kind does not join them unasked)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from evaluator.core.errors import InputError
from evaluator.kinds import registry
from evaluator.tuning.advise import apply
from evaluator.tuning.advise.config import ADVISE_DEFAULTS
from evaluator.tuning.advise.plan import AdviseConfig, designs, fixed_settings


def _ivfflat_bq() -> registry.Kind:
    """A kind the registry does not have: IVFFlat over binary-quantized vectors, re-ranked."""
    return replace(
        registry.KINDS["ivfflat"],
        name="ivfflat-bq",
        guc_prefixes=("ivfflat.", "bq."),
        work_settings=("bq.candidates", "ivfflat.probes"),
        cast_type="bit",
        rerank_candidates="bq.candidates",
        advise_default=False,
    )


def test_a_find_of_the_rerank_candidates_runs_under_the_kinds_own_iterative_scan():
    bq = registry.KINDS["hnsw-bq"]
    assert bq.quantized and bq.find_setting() == "bq.candidates"
    assert fixed_settings(bq, "bq.candidates") == {"hnsw.iterative_scan": "strict_order"}
    ivf_bq = _ivfflat_bq()
    assert ivf_bq.quantized and ivf_bq.find_setting() == "bq.candidates"
    # IVFFlat's iterative scan has no strict_order (pgvector 0.8): its only mode
    assert fixed_settings(ivf_bq, "bq.candidates") == {"ivfflat.iterative_scan": "relaxed_order"}
    # a server setting found needs nothing fixed; DiskANN has no iterative scan at all
    assert fixed_settings(registry.KINDS["hnsw"], "hnsw.ef_search") == {}
    assert registry.KINDS["diskann"].rows_asked_scan() == {}


def test_the_rebuilt_index_note_names_the_designs_own_setting():
    assert "--find hnsw.ef_search on your index" in apply.rebuilt_note("hnsw", {"m": "16"})
    assert (
        "--find bq.candidates --set hnsw.iterative_scan=strict_order on your index"
        in apply.rebuilt_note("hnsw-bq", {"m": "16"})
    )
    assert "--find ivfflat.probes" in apply.rebuilt_note("ivfflat-halfvec", {"lists": "100"})
    assert apply.rebuilt_note("diskann", {}) is None


def test_default_designs_are_the_registrys_flagged_kinds():
    every = list(registry.ann_kinds())
    planned = [d.kind for d in designs(AdviseConfig(target="t"), every, {})]
    assert planned == list(registry.advise_kinds())
    # pinned on purpose: a new default design changes advise's runtime and output, so it is
    # added here knowingly (a kind not flagged as default needs no change here)
    assert registry.advise_kinds() == ("hnsw", "hnsw-halfvec", "hnsw-bq", "ivfflat", "diskann")
    # grouped (--group-by), the label-filtered design too (issue 49)
    assert registry.advise_kinds(grouped=True) == (*registry.advise_kinds(), "diskann-labels")


def test_advise_defaults_are_one_definition():
    """The command's option defaults and the API's are ADVISE_DEFAULTS (as SWEEP_DEFAULTS)."""
    import inspect

    import click

    from evaluator.api.dba import DbaMethods
    from evaluator.cli.commands.advise_cmd import advise
    from evaluator.targets.groups import DEFAULT_MAX_GROUPS

    options = {p.name: p.default for p in advise.params if isinstance(p, click.Option)}
    assert options["target_recall"] == ADVISE_DEFAULTS.target_recall
    assert options["concurrency"] == ADVISE_DEFAULTS.concurrency
    assert options["k"] == ADVISE_DEFAULTS.k
    assert options["repeat"] == ADVISE_DEFAULTS.repeat
    assert options["max_groups"] == ADVISE_DEFAULTS.max_groups
    assert options["build_timeout"] == ADVISE_DEFAULTS.build_timeout_s
    assert options["statement_timeout"] == ADVISE_DEFAULTS.statement_timeout
    signature = inspect.signature(DbaMethods.advise)
    for name, param in signature.parameters.items():
        field = "build_timeout_s" if name == "build_timeout" else name
        if field in AdviseConfig.__dataclass_fields__ and field not in ("target", "testset"):
            default = getattr(ADVISE_DEFAULTS, field)
            # a collection's default is None in the API (designs, build, settings: none given)
            expected = None if isinstance(default, (tuple, dict)) else default
            assert param.default == expected, name
    assert ADVISE_DEFAULTS.max_groups == DEFAULT_MAX_GROUPS


def test_a_designs_sweep_takes_advises_shared_fields_as_they_are():
    """advise/measure.config takes the option groups named once in ``config.SWEPT`` (each
    composed by both configurations) as advise has them and sets the rest itself: a field both
    configurations gain is in a shared group or set there, never copied by hand."""
    from dataclasses import fields

    from evaluator.tuning.advise.config import SWEPT
    from evaluator.tuning.advise.measure import config
    from evaluator.tuning.advise.plan import Design
    from evaluator.tuning.sweep import SweepConfig

    assert all(issubclass(AdviseConfig, g) and issubclass(SweepConfig, g) for g in SWEPT)
    shared = {f.name for g in SWEPT for f in fields(g)}
    advise_fields = {f.name for f in fields(AdviseConfig)}
    sweep_fields = {f.name for f in fields(SweepConfig)}
    # the fields both have outside the shared groups, that a design's sweep sets itself
    assert (advise_fields & sweep_fields) - shared == {"target", "build"}
    cfg = replace(
        ADVISE_DEFAULTS, target="kb", k=7, repeat=2, fresh=True, testset="t", settings={"a": "1"}
    )
    design = Design(kind="hnsw", build={"m": "8"}, find="hnsw.ef_search", fixed={"b": "2"})
    sweep = config(cfg, design, "kb")
    assert (sweep.k, sweep.depth, sweep.repeat, sweep.fresh, sweep.testset) == (7, 7, 2, True, "t")
    assert (sweep.final_rounds, sweep.settings) == (3, {"a": "1", "b": "2"})
    assert (sweep.stage, sweep.build, sweep.find) == ("hnsw", ("m=8",), "hnsw.ef_search")


def test_watch_defaults_are_one_definition():
    """The command's option defaults and the API's are WATCH_DEFAULTS."""
    import inspect

    import click

    from evaluator.api.dba import DbaMethods
    from evaluator.cli.commands.watch_cmd import watch
    from evaluator.tuning.watch.config import WATCH_DEFAULTS

    options = {p.name: p.default for p in watch.params if isinstance(p, click.Option)}
    assert options["k"] == WATCH_DEFAULTS.k
    assert options["statement_timeout"] == WATCH_DEFAULTS.statement_timeout
    assert options["max_groups"] == WATCH_DEFAULTS.max_groups
    for name, param in inspect.signature(DbaMethods.watch).parameters.items():
        if name in WATCH_DEFAULTS.__dataclass_fields__ and name not in (
            "target",
            "stage",
            "testset",
        ):
            expected = getattr(WATCH_DEFAULTS, name)
            assert param.default == (None if isinstance(expected, dict) else expected), name


def test_a_named_design_the_server_lacks_says_what_it_needs():
    every = [n for n in registry.ann_kinds() if n != "ivfflat-halfvec"]
    cfg = AdviseConfig(target="t", designs=("ivfflat-halfvec",))
    with pytest.raises(InputError, match="needs extension vector 0.7.0 or later with halfvec"):
        designs(cfg, every, {})
    cfg = AdviseConfig(target="t", designs=("hnsw-bq",))
    with pytest.raises(InputError, match="cannot be built here: vector 0.6.2 has no bit search"):
        designs(cfg, [], {"hnsw-bq": "vector 0.6.2 has no bit search (upgrade vector)"})


def test_iterative_scan_modes_are_the_servers(conn):
    """Each kind's iterative scan modes are those its extension's setting takes (pgvector 0.8:
    HNSW strict_order and relaxed_order, IVFFlat relaxed_order only), besides off."""
    conn.execute("SELECT '[1]'::vector")  # pgvector's library defines hnsw.* and ivfflat.*
    for name, kind in registry.KINDS.items():
        if kind.iterative_scan is None:
            continue
        setting, modes = kind.iterative_scan
        (values,) = conn.execute(
            "SELECT enumvals FROM pg_settings WHERE name = %s", (setting,)
        ).fetchone()
        assert sorted(values) == sorted(["off", *modes]), name
