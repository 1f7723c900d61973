"""A miniformer export as a Hugging Face model folder: transformers' Auto classes load it with trust_remote_code.

No architecture transformers ships maps every variant the study trains (ALiBi, T5 buckets in both directions, the
ablation switches, post-norm), so the folder carries its own modeling code, the convention for a new architecture:
``configuration_miniformer.py`` and ``modeling_miniformer.py`` from this package, and ``miniformer_network.py``, the
package's network modules (positions, attention, model) joined into one file that needs only torch. The weights are
the very tensors ``miniformer.load`` reads, under the same names.
"""
