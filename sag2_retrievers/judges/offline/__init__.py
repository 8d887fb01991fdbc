"""The offline judges: the pool judge (`pool`), boosted trees over lexical and pool-graph
features of the request (`pool_features`, `pool_terms`), evaluated in numpy (`trees`), its
model file read and checked by `model_files`."""
