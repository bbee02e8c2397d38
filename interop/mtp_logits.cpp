// mtp_logits: what llama.cpp computes for a prompt with a model's MTP
// (NextN) head, for interop tests to compare with the numpy reference.
//
//   mtp_logits TRUNK.gguf DRAFT.gguf|- [--override KEY=INT]... [--depth D] TOKEN...
//
// DRAFT is an MTP-only sidecar, or "-" for the head bundled in TRUNK. The
// trunk decodes the tokens t_0..t_{n-1} (every row an output); the head then
// decodes t_1..t_{n-1} at positions 1..n-1, each paired with the trunk's
// h_nextn of the row before (as llama.cpp's draft-mtp driver pairs them).
// Prints one JSON object: "h" (the trunk's h_nextn rows), "trunk" (the
// trunk's logits rows) and "mtp" (the head's logits rows). --override sets
// an integer metadata key of both models, as llama.cpp's --override-kv does
// (e.g. deepseek2.expert_gating_func=2: llama.cpp picks sigmoid routing for
// GLM-4.7-Flash by its real layer count and vocabulary, not for a tiny twin).
// --depth D (chained heads: step35, mimo2, hy_v3) runs the MTP layers 0..D-1
// as the draft-mtp driver chains them (llama_set_nextn_layer_offset), teacher
// forced: layer j decodes t_{1+j}..t_{n-1} at positions 1+j..n-1, row k paired
// with layer j-1's h_nextn of its row k (the trunk's for j = 0), each depth on
// an emptied cache; "mtp" then holds one list of rows per depth.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "llama.h"
#include "llama-ext.h"

static void rows(const char * key, const float * data, int n, int width, bool last) {
    std::printf("\"%s\":[", key);
    for (int i = 0; i < n; ++i) {
        std::printf(i ? ",[" : "[");
        for (int j = 0; j < width; ++j) {
            std::printf(j ? ",%.9g" : "%.9g", data[(size_t) i * width + j]);
        }
        std::printf("]");
    }
    std::printf(last ? "]" : "],");
}

int main(int argc, char ** argv) {
    if (argc < 5) {
        std::fprintf(stderr, "usage: mtp_logits TRUNK.gguf DRAFT.gguf|- TOKEN TOKEN...\n");
        return 2;
    }
    std::vector<llama_token> toks;
    std::vector<llama_model_kv_override> kv;
    int depth = 0;  // 0: one head, "mtp" a list of rows
    for (int i = 3; i < argc; ++i) {
        if (std::string(argv[i]) == "--depth" && i + 1 < argc) {
            depth = std::atoi(argv[++i]);
            continue;
        }
        if (std::string(argv[i]) == "--override" && i + 1 < argc) {
            const std::string o = argv[++i];
            const size_t eq = o.find('=');
            llama_model_kv_override x{};
            x.tag = LLAMA_KV_OVERRIDE_TYPE_INT;
            std::strncpy(x.key, o.substr(0, eq).c_str(), sizeof(x.key) - 1);
            x.val_i64 = std::atoll(o.substr(eq + 1).c_str());
            kv.push_back(x);
            continue;
        }
        toks.push_back((llama_token) std::atoi(argv[i]));
    }
    if (!kv.empty()) {
        kv.push_back({});  // the list ends with an empty key
    }
    const int n = (int) toks.size();
    const bool bundled = std::string(argv[2]) == "-";

    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.load_mtp = bundled;
    mp.kv_overrides = kv.empty() ? nullptr : kv.data();
    llama_model * trunk = llama_model_load_from_file(argv[1], mp);
    if (!trunk) {
        std::fprintf(stderr, "cannot load %s\n", argv[1]);
        return 1;
    }
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 512;
    cp.n_batch = 512;
    cp.n_ubatch = 512;
    cp.n_threads = cp.n_threads_batch = 2;
    llama_context * tgt = llama_init_from_model(trunk, cp);
    llama_set_embeddings_nextn(tgt, true, /*masked*/ false);

    llama_batch b = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; ++i) {
        b.token[i] = toks[i];
        b.pos[i] = i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = 1;
    }
    b.n_tokens = n;
    if (llama_decode(tgt, b) != 0) {
        std::fprintf(stderr, "trunk decode failed\n");
        return 1;
    }
    // h_nextn is n_embd_out wide (DeepSeek-V4: its hc_mult hyper-connection
    // streams), as the draft-mtp driver reads it (common/speculative.cpp).
    const int n_embd = llama_model_n_embd_out(trunk);
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(trunk));
    std::vector<float> h((size_t) n * n_embd), logits((size_t) n * n_vocab);
    for (int i = 0; i < n; ++i) {
        const float * hi = llama_get_embeddings_nextn_ith(tgt, i);
        const float * li = llama_get_logits_ith(tgt, i);
        std::copy(hi, hi + n_embd, h.begin() + (size_t) i * n_embd);
        std::copy(li, li + n_vocab, logits.begin() + (size_t) i * n_vocab);
    }

    llama_model * head = trunk;
    if (!bundled) {
        llama_model_params dp = llama_model_default_params();
        dp.load_mtp = true;
        dp.kv_overrides = mp.kv_overrides;
        head = llama_model_load_from_file(argv[2], dp);
        if (!head) {
            std::fprintf(stderr, "cannot load %s\n", argv[2]);
            return 1;
        }
    }
    llama_context_params dcp = cp;
    dcp.ctx_type = LLAMA_CONTEXT_TYPE_MTP;
    dcp.ctx_other = tgt;
    llama_context * dft = llama_init_from_model(head, dcp);
    if (!dft) {
        std::fprintf(stderr, "cannot create the MTP context\n");
        return 1;
    }
    if (depth > 0) {
        llama_set_embeddings_nextn(dft, true, /*masked*/ false);  // each depth's h_nextn feeds the next
    }
    // prev: the hidden rows the current depth pairs its tokens with.
    std::vector<float> prev = h;
    std::vector<std::vector<float>> mtps;
    for (int j = 0; j < std::max(depth, 1); ++j) {
        if (depth > 0) {
            llama_set_nextn_layer_offset(dft, j);
            llama_memory_seq_rm(llama_get_memory(dft), 0, -1, -1);
        }
        const int rows_j = n - 1 - j;
        llama_batch_ext * eb = llama_batch_ext_init(dft);
        for (int k = 0; k < rows_j; ++k) {
            const int32_t idx = llama_batch_ext_add_token(eb, 0, toks[k + 1 + j]);
            const llama_pos pos[4] = { k + 1 + j, 0, 0, 0 };
            llama_batch_ext_set_pos(eb, idx, pos);
            llama_batch_ext_set_embd_token(eb, idx, { prev.data() + (size_t) k * n_embd, 1, (size_t) n_embd });
            llama_batch_ext_set_output_logits(eb, idx, true);
        }
        if (llama_process(dft, LLAMA_PROCESS_TYPE_DECODE, eb) != 0) {
            std::fprintf(stderr, "MTP decode failed at depth %d\n", j);
            return 1;
        }
        std::vector<float> mtp((size_t) rows_j * n_vocab), next((size_t) rows_j * n_embd);
        for (int i = 0; i < rows_j; ++i) {
            const float * li = llama_get_logits_ith(dft, i);
            std::copy(li, li + n_vocab, mtp.begin() + (size_t) i * n_vocab);
            if (depth > 0) {
                const float * hi = llama_get_embeddings_nextn_ith(dft, i);
                std::copy(hi, hi + n_embd, next.begin() + (size_t) i * n_embd);
            }
        }
        mtps.push_back(mtp);
        prev = next;
        llama_batch_ext_free(eb);
    }
    std::printf("{");
    rows("h", h.data(), n, n_embd, false);
    rows("trunk", logits.data(), n, n_vocab, false);
    if (depth == 0) {
        rows("mtp", mtps[0].data(), n - 1, n_vocab, true);
    } else {
        std::printf("\"mtp\":[");
        for (int j = 0; j < depth; ++j) {
            std::printf(j ? ",{" : "{");
            rows("rows", mtps[j].data(), n - 1 - j, n_vocab, true);
            std::printf("}");
        }
        std::printf("]");
    }
    std::printf("}\n");
    llama_batch_free(b);
    llama_free(dft);
    llama_free(tgt);
    if (head != trunk) {
        llama_model_free(head);
    }
    llama_model_free(trunk);
    llama_backend_free();
    return 0;
}
