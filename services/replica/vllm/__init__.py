"""vLLM behind slomesh's Engine interface: config, engine adapter, scheduler hook, tiny test model.

Importing this package (or `config`, `tiny_model`) does not import vLLM; `engine` and
`scheduler_hook` import it when an engine is constructed or a scheduler is instantiated.
"""

from services.replica.vllm.config import VLLMEngineConfig

__all__ = ["VLLMEngineConfig"]
