"""Parallel-training jobs of large language models (docs/guide/llm-jobs.md): a transformer's shape
(:mod:`~topoopt_ilp.jobs.model`), its ``tp x pp x dp (x ep)`` split (:mod:`~topoopt_ilp.jobs.job`),
what one iteration moves, computes and holds (:mod:`~topoopt_ilp.jobs.iteration`), every split that
fits memory (:mod:`~topoopt_ilp.jobs.enumerate`) and the models people train now
(:mod:`~topoopt_ilp.jobs.zoo`)."""
