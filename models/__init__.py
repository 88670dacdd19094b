"""Math programs, one module per problem (installed as topoopt_ilp.models)."""
