"""The course's figures, each computed from named data (a reference solution's output, a config,
a seeded example) and drawn to course/figures/png/. Rebuild all with `make figures`.

Every module has `data()` (the plotted numbers; tests/test_figures.py checks them against an
independent source) and `draw(data, path)`.
"""

FIGURES = ("fp_formats", "rope_pairs", "causal_mask", "roofline", "flash_tiling", "paged_slots",
           "prefix_cache", "batching", "pipeline_schedules", "tp_fg", "ring_steps", "alpha_beta", "quant_outlier", "spec_rounds", "trace_gap", "trace_breakdown", "arch_knobs", "mla_absorption", "backfill", "engine_loop", "mig_packing", "split_kv", "ddp_overlap", "zero_memory", "ppo_clip", "grpo_length_weights", "checkpoint_interval", "elastic_timeline", "rope_scaling", "zigzag_balance",
           "ep_dispatch", "goodput_rate", "token_mask", "pd_placement")
