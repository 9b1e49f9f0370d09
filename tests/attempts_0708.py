"""Wrong attempts at notebooks 07 and 08 written as a learner would, for the diagnosis
tests (same fields as tests/attempts_own.py). The given classes of the notebooks come from
grader/answers/correct.py (GivenBlock, GivenGPT, GivenCache: the notebooks' __init__), so an attempt
writes only what the student writes."""

_TILE_LOOP = '''
def tiled_attention(q, k, v, tile_size):
    T, hs = q.shape[-2], q.shape[-1]
    out = {OUT}
    for i0 in range(0, T, tile_size):
        qi = q[..., i0:i0 + tile_size, :]
        tq = qi.shape[-2]
        m = torch.full((*qi.shape[:-1], 1), {START}, dtype=q.dtype, device=q.device)
        l = torch.zeros_like(m)
        acc = torch.zeros_like(qi)
        for j0 in range(0, {STOP}, tile_size):
            kj, vj = k[..., j0:j0 + tile_size, :], v[..., j0:j0 + tile_size, :]
            s = qi @ kj.transpose(-2, -1) * hs ** -0.5
            rows = torch.arange(i0, i0 + tq{DEVICE}).view(-1, 1)
            cols = torch.arange(j0, j0 + kj.shape[-2]{DEVICE}).view(1, -1)
            s = s.masked_fill(cols {CMP} rows, float("-inf"))
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            alpha = torch.exp(m - m_new)
            p = torch.exp(s - m_new)
            l = l * alpha + p.sum(-1, keepdim=True)
            acc = acc * alpha + p @ vj
            m = m_new
        out[..., i0:i0 + tq, :] = acc / l
    return out
'''


def _tiled(**changes):
    fields = {"OUT": "torch.empty_like(q)", "START": 'float("-inf")', "STOP": "i0 + tq", "DEVICE": ", device=q.device",
              "CMP": ">"}
    fields.update(changes)
    code = _TILE_LOOP
    for name, text in fields.items():
        code = code.replace("{" + name + "}", text)
    return code


_CACHE = '''
class CachedSelfAttention(GivenCache):
    def forward(self, x):
        B, T_new, C = x.shape
        split = lambda t: t.view(B, T_new, self.n_heads, self.head_size).transpose(1, 2)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        if self.k_cache is not None:
            k = torch.cat([self.k_cache, k], dim={DIM})
            v = torch.cat([self.v_cache, v], dim={DIM})
        self.k_cache, self.v_cache = k[:, :, -self.block_size:], v[:, :, -self.block_size:]
        L = self.k_cache.shape[2]
        rows = torch.arange(L - T_new, L{DEVICE}).view(-1, 1)
        cols = torch.arange(L{DEVICE}).view(1, -1)
        wei = q @ self.k_cache.transpose(-2, -1) * self.head_size ** -0.5
        wei = torch.softmax(wei.masked_fill(cols > rows, float("-inf")), dim=-1)
        return self.proj((wei @ self.v_cache).transpose(1, 2).reshape(B, T_new, -1))
'''


def _cache(dim="2", device=", device=x.device"):
    return _CACHE.replace("{DIM}", dim).replace("{DEVICE}", device)


ATTEMPTS = [
    # --- 07: Block, GPT, generate -------------------------------------------------------
    dict(notebook="07_transformer_block", exercise="Block", id="own-block-dropout-always-on",
         intended="F.dropout on the attention branch, on in evaluation too", expect=["not_repeatable"], code='''
class Block(GivenBlock):
    def forward(self, x):
        x = x + F.dropout(self.attn(self.ln1(x)), 0.2)
        return x + self.mlp(self.ln2(x))
'''),
    dict(notebook="07_transformer_block", exercise="GPT", id="own-gpt-dropout-always-on",
         intended="F.dropout on the embeddings, on in evaluation too", expect=["not_repeatable"], code='''
class GPT(GivenGPT):
    def forward(self, idx):
        T = idx.shape[1]
        x = self.token_embedding(idx) + self.position_embedding(torch.arange(T, device=idx.device))
        x = F.dropout(x, 0.1)
        return self.lm_head(self.ln_f(self.blocks(x)))
'''),
    dict(notebook="07_transformer_block", exercise="GPT", id="own-gpt-arange-no-device",
         intended="positions made on the CPU whatever idx's device", expect=["follows_inputs"], code='''
class GPT(GivenGPT):
    def forward(self, idx):
        T = idx.shape[1]
        x = self.token_embedding(idx) + self.position_embedding(torch.arange(T))
        return self.lm_head(self.ln_f(self.blocks(x)))
'''),
    dict(notebook="07_transformer_block", exercise="generate", id="own-generate-crop-model-attribute",
         intended="crops to model.block_size instead of the argument", expect=["cropped_to_the_models_size"], code='''
def generate(model, idx, max_new_tokens, block_size, temperature=1.0, generator=None):
    for _ in range(max_new_tokens):
        logits = model(idx[:, -model.block_size:])[:, -1, :]
        probs = F.softmax(logits / temperature, dim=-1)
        idx = torch.cat([idx, torch.multinomial(probs, 1, generator=generator)], dim=1)
    return idx
'''),
    # --- 08: online softmax, tiled attention, the cache ------------------------------------
    dict(notebook="08_attention_at_scale", exercise="online_softmax", id="own-online-float32-stats",
         intended="running max and sum created without dtype", expect=["follows_inputs"], code='''
def online_softmax(scores):
    m = torch.full(scores.shape[:-1], float("-inf"))
    l = torch.zeros(scores.shape[:-1])
    for j in range(scores.shape[-1]):
        m_new = torch.maximum(m, scores[..., j])
        shift = torch.where(m_new == float("-inf"), torch.zeros_like(m_new), m_new)
        l[...] = l * torch.exp(m - shift) + torch.exp(scores[..., j] - shift)
        m[...] = m_new
    return torch.exp(scores - m.unsqueeze(-1)) / l.unsqueeze(-1)
'''),
    dict(notebook="08_attention_at_scale", exercise="tiled_attention", id="own-tiled-strip",
         intended="one query tile against all keys up to it, then a plain softmax", expect=["tile_strip"], code='''
def tiled_attention(q, k, v, tile_size):
    T, hs = q.shape[-2], q.shape[-1]
    out = torch.empty_like(q)
    for i0 in range(0, T, tile_size):
        i1 = min(i0 + tile_size, T)
        s = q[..., i0:i1, :] @ k[..., :i1, :].transpose(-2, -1) * hs ** -0.5
        hide = torch.arange(i1, device=q.device)[None, :] > torch.arange(i0, i1, device=q.device)[:, None]
        out[..., i0:i1, :] = torch.softmax(s.masked_fill(hide, float("-inf")), dim=-1) @ v[..., :i1, :]
    return out
'''),
    dict(notebook="08_attention_at_scale", exercise="tiled_attention", id="own-tiled-max-zero",
         intended="the running maximum started at 0", expect=["max_started_at_zero"], code=_tiled(START="0.0")),
    dict(notebook="08_attention_at_scale", exercise="tiled_attention", id="own-tiled-visits-future",
         intended="every key tile visited, the future ones masked", expect=["future_tiles_visited"], code=_tiled(STOP="T")),
    dict(notebook="08_attention_at_scale", exercise="tiled_attention", id="own-tiled-ge-mask",
         intended="key >= query hidden: the diagonal too", expect=["diagonal_hidden"], code=_tiled(CMP=">=")),
    dict(notebook="08_attention_at_scale", exercise="tiled_attention", id="own-tiled-out-no-dtype",
         intended="output buffer created without dtype", expect=["follows_inputs", "dtype"],
         code=_tiled(OUT="torch.zeros(q.shape)")),
    dict(notebook="08_attention_at_scale", exercise="tiled_attention", id="own-tiled-arange-no-device",
         intended="positions made on the CPU whatever q's device", expect=["follows_inputs"], code=_tiled(DEVICE="")),
    dict(notebook="08_attention_at_scale", exercise="CachedSelfAttention", id="own-cache-cat-heads",
         intended="the cache extended along dim 1", expect=["cache_cat_dim"], code=_cache(dim="1")),
    dict(notebook="08_attention_at_scale", exercise="CachedSelfAttention", id="own-cache-cat-features",
         intended="the cache extended along the last dim", expect=["cat_sizes"], code=_cache(dim="-1")),
    dict(notebook="08_attention_at_scale", exercise="CachedSelfAttention", id="own-cache-arange-no-device",
         intended="positions made on the CPU whatever x's device", expect=["follows_inputs"], code=_cache(device="")),
    dict(notebook="08_attention_at_scale", exercise="CachedSelfAttention", id="own-cache-no-scale",
         intended="scores not scaled", expect=["missing_scale"],
         code=_cache().replace(" * self.head_size ** -0.5", "")),
    dict(notebook="08_attention_at_scale", exercise="CachedSelfAttention", id="own-cache-merge-no-transpose",
         intended="heads merged without transposing back", expect=["merge_without_transpose"],
         code=_cache().replace("(wei @ self.v_cache).transpose(1, 2).reshape", "(wei @ self.v_cache).reshape")),
    dict(notebook="07_transformer_block", exercise="GPT", id="own-gpt-no-blocks",
         intended="the blocks left out", expect=["no_blocks"], code='''
class GPT(GivenGPT):
    def forward(self, idx):
        T = idx.shape[1]
        x = self.token_embedding(idx) + self.position_embedding(torch.arange(T, device=idx.device))
        return self.lm_head(self.ln_f(x))
'''),
    # --- an error whose numbers are no sizes ----------------------------------------------
    dict(notebook="05_scaled_attention", exercise="scaled_dot_product_attention", id="own-too-many-indices",
         intended="indexes a fourth dim of a 3-D tensor", expect=[], code='''
def scaled_dot_product_attention(q, k, v, mask=None):
    wei = q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5
    if mask is not None:
        wei = wei.masked_fill(mask, float("-inf"))
    wei = torch.softmax(wei, dim=-1)
    return wei[:, :, :, 0] @ v
'''),
]
