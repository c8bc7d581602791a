"""The one-request-at-a-time reference the fast log-likelihood path is checked against: a full
forward pass per request, no batching, no prefix cache (also the speed scripts' baseline)."""


def naive_loglikelihoods(model, requests) -> list[float]:
    """log P(continuation | context) for each request, computed alone from the model's logits."""
    import torch

    result = []
    for request in requests:
        tokens, scored = model.scored_sequence(request)
        with torch.inference_mode():
            ids = torch.tensor([tokens[:-1]], device=model.network.device)
            logits = model.network(input_ids=ids).logits[0].float()
        logprobs = torch.log_softmax(logits, dim=-1)
        first = len(tokens) - scored
        result.append(sum(logprobs[first - 1 + j, tokens[first + j]].item() for j in range(scored)))
    return result
