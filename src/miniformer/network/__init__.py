"""The network: a decoder-only Transformer and the objectives that train it.

Read in this order, as one would read nanoGPT's model.py:
  attention.py   scaled dot-product attention from its primitives, the causal and prefix masks, one switchable module
  positions.py   the ways of telling attention where a token is: a registry (POSITIONS) of methods
  model.py       embed -> blocks (residual, norm placement) -> head; generation with a KV cache
  objectives.py  causal LM, masked LM, prefix LM and span corruption as objects over the same model
  flops.py       parameter and FLOP counts, for the benchmarks and the report
  given.py       a course student's code installed into a model (never the package's own runs)
"""
