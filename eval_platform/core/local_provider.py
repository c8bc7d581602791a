"""Local Hugging Face models as a litellm custom provider (`local/<name>`), so that local and API
models share one code path. Imported only when the gateway is first used (it imports litellm)."""

import asyncio

import litellm
from litellm import CustomLLM

from eval_platform.core.models import Chat, GenerationRequest
from eval_platform.core.models.local import load_local_model

PROVIDER = "local"


class LocalModelHandler(CustomLLM):
    def completion(self, model, messages, api_base, custom_prompt_dict, model_response, print_verbose, encoding,
                   api_key, logging_obj, optional_params, acompletion=None, litellm_params=None, logger_fn=None,
                   headers={}, timeout=None, client=None):
        system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
        user = "\n\n".join(m["content"] for m in messages if m["role"] != "system")
        local = load_local_model(f"{PROVIDER}/{model}")
        request = GenerationRequest(Chat(system, user), max_new_tokens=int(optional_params.get("max_tokens") or 256),
                                    stop=tuple(optional_params.get("stop") or ()))
        (text,) = local.generate([request])
        model_response.choices[0].message.content = text
        model_response.model = f"{PROVIDER}/{model}"
        prompt_tokens, completion_tokens = len(local.encode(local.render(request.prompt))), len(local.encode(text))
        model_response.usage = litellm.Usage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                                             total_tokens=prompt_tokens + completion_tokens)
        return model_response

    async def acompletion(self, *args, **kwargs):
        return await asyncio.to_thread(self.completion, *args, **kwargs)


def register() -> None:
    if not any(item["provider"] == PROVIDER for item in litellm.custom_provider_map):
        litellm.custom_provider_map.append({"provider": PROVIDER, "custom_handler": LocalModelHandler()})
