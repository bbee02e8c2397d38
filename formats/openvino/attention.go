package openvino

// Dim returns dimension i of x's runtime shape as a 1-element i64 tensor.
func (g *Graph) Dim(name string, x Output, i int64) Output {
	return g.Gather(name, g.ShapeOf(name+"/shape", x), g.ConstI64(name+"/index", i), g.ScalarI64(name+"/axis", 0), 0, []int64{1})
}

// KVCache is the stateful cache block the CPU and GPU plugins fuse with
// attention: ReadValue (initialised to zeros [B, heads, 0, dim]) ->
// Gather(beam_idx) -> Concat(current, axis 2) -> Assign, under variable id.
func (g *Graph) KVCache(id string, cur, batchOf, beamIdx Output, heads, dim int64) Output {
	shape := g.Concat(id+"/init_shape", 0, []int64{4},
		g.Dim(id+"/batch", batchOf, 0), g.ConstI64(id+"/heads", heads), g.ConstI64(id+"/zero_len", 0), g.ConstI64(id+"/dim", dim))
	init := g.Broadcast(id+"/init", g.ScalarF32(id+"/zero", 0), shape, "numpy", []int64{Dynamic, heads, 0, dim})
	past := g.ReadValue(id, init, F32, []int64{Dynamic, heads, Dynamic, dim})
	reordered := g.Gather(id+"/beam_gather", past, beamIdx, g.ScalarI64(id+"/beam_axis", 0), 0, []int64{Dynamic, heads, Dynamic, dim})
	kv := g.Concat(id+"/concat", 2, []int64{Dynamic, heads, Dynamic, dim}, reordered, cur)
	g.Assign(id, kv)
	return kv
}

// RepeatKV expands [B, kvHeads, L, dim] to [B, kvHeads*groups, L, dim] for
// grouped-query attention, in the bidirectional-Broadcast form that keeps
// the stateful attention fusion.
func (g *Graph) RepeatKV(name string, kv Output, groups, kvHeads, dim int64) Output {
	if groups == 1 {
		return kv
	}
	u := g.Unsqueeze(name+"/unsqueeze", kv, 2, []int64{Dynamic, kvHeads, 1, Dynamic, dim})
	b := g.Broadcast(name+"/broadcast", u, g.ConstI64(name+"/target", 1, 1, groups, 1, 1), "bidirectional", []int64{Dynamic, kvHeads, groups, Dynamic, dim})
	return g.Reshape(name+"/reshape", b, g.ConstI64(name+"/shape", 0, kvHeads*groups, -1, dim), true, []int64{Dynamic, kvHeads * groups, Dynamic, dim})
}

// AttentionMask builds the additive mask [B, 1, S, T] for queries at the
// last S of T positions: causal, and closed where attention_mask [B, T] is 0.
func (g *Graph) AttentionMask(name string, attentionMask, queries Output) Output {
	t := g.Dim(name+"/total", attentionMask, 1)
	s := g.Dim(name+"/new", queries, 1)
	past := g.Subtract(name+"/past", t, s)
	one := g.ScalarI64(name+"/one", 1)
	scalar := func(n string, x Output) Output { return g.Squeeze(n, x) }
	kpos := g.Range(name+"/key_positions", g.ScalarI64(name+"/zero", 0), scalar(name+"/total_scalar", t), one, I64)
	qpos := g.Range(name+"/query_positions", scalar(name+"/past_scalar", past), scalar(name+"/total_scalar2", t), one, I64)
	causal := g.LessEqual(name+"/causal", g.Unsqueeze(name+"/keys_row", kpos, 0, []int64{1, Dynamic}),
		g.Unsqueeze(name+"/queries_col", qpos, 1, []int64{Dynamic, 1}))
	open := g.NotEqual(name+"/open", attentionMask, g.ScalarI64(name+"/closed", 0))
	open4 := g.Unsqueeze(name+"/open_4d", g.Unsqueeze(name+"/open_3d", open, 1, []int64{Dynamic, 1, Dynamic}), 1, []int64{Dynamic, 1, 1, Dynamic})
	allowed := g.LogicalAnd(name+"/allowed", g.Unsqueeze(name+"/causal_4d", g.Unsqueeze(name+"/causal_3d", causal, 0, nil), 0, nil), open4)
	return g.Select(name+"/additive", allowed, g.ScalarF32(name+"/keep", 0), g.ScalarF32(name+"/drop", -65504))
}

// TiledMoE is the routed-expert block in the tiled form the plugins rewrite
// into gather-matmuls over the top-k experts only: router softmax, top-k
// (renormalised when normTopK), dense routing weights by ScatterElementsUpdate,
// every expert as a batched MatMul over a Tile of the tokens, SwiGLU, and a
// weighted sum over experts. x is [B, S, H]; the result is [B, S, H].
func (g *Graph) TiledMoE(name string, x Output, router, gate, up, down Weight, experts, topK, hidden int64, normTopK bool) Output {
	x2 := g.Reshape(name+"/experts_input", x, g.ConstI64(name+"/flat_shape", -1, hidden), false, []int64{Dynamic, hidden})
	logits := g.Linear(name+"/router", x2, router)
	probs := g.Softmax(name+"/softmax", logits, -1)
	vals, idx := g.TopK(name+"/topk", probs, topK)
	w := vals
	if normTopK {
		w = g.Divide(name+"/topk_norm", vals, g.ReduceSum(name+"/topk_sum", vals, true, -1))
	}
	tokens := g.Gather(name+"/tokens", g.ShapeOf(name+"/topk_shape", idx), g.ConstI64(name+"/tokens_index", 0), g.ScalarI64(name+"/tokens_axis", 0), 0, []int64{1})
	zeros := g.Broadcast(name+"/zeros", g.ConstF32(name+"/zero", []int64{1}, 0),
		g.Concat(name+"/zeros_shape", 0, []int64{2}, tokens, g.ConstI64(name+"/experts", experts)), "numpy", []int64{Dynamic, experts})
	dense := g.ScatterElementsUpdate(name+"/routing", zeros, idx, w, 1)
	rt := g.Transpose(name+"/routing_t", dense, 1, 0)
	rr := g.Reshape(name+"/routing_reshape", rt, g.Concat(name+"/routing_shape", 0, []int64{3},
		g.ConstI64(name+"/routing_experts", experts), tokens, g.ConstI64(name+"/routing_one", -1)), true, []int64{experts, Dynamic, 1})
	ru := g.Unsqueeze(name+"/routing_unsqueeze", rr, -1, []int64{experts, Dynamic, 1, 1})

	tiled := g.Tile(name+"/tile", x2, experts, 1)
	xe := g.Reshape(name+"/tile_reshape", tiled, g.ConstI64(name+"/tile_shape", experts, -1, hidden), false, []int64{experts, Dynamic, hidden})
	gt := g.Swish(name+"/swish", g.Linear(name+"/gate_proj", xe, gate))
	h := g.Multiply(name+"/swiglu", gt, g.Linear(name+"/up_proj", xe, up))
	d := g.Linear(name+"/down_proj", h, down)
	dr := g.Reshape(name+"/end_reshape", d, g.ConstI64(name+"/end_shape", experts, -1, 1, hidden), false, []int64{experts, Dynamic, 1, hidden})
	weighted := g.Multiply(name+"/weighted", dr, ru)
	summed := g.ReduceSum(name+"/sum", weighted, false, 0)
	return g.Reshape(name+"/out", summed, g.ShapeOf(name+"/out_shape", x), false, x.Shape())
}
