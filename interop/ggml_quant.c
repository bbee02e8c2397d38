/* Quantizes raw float32 rows with libggml's ggml_quantize_chunk (no
 * imatrix: the reference kernels llama-quantize runs), for
 * interop/test_gguf.py to compare with mtpconv's Go kernels.
 * usage: ggml_quant TYPE ROWLEN IN.f32 OUT */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "ggml.h"

int main(int argc, char ** argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: ggml_quant TYPE ROWLEN IN.f32 OUT\n");
        return 2;
    }
    enum ggml_type type = GGML_TYPE_COUNT;
    for (int t = 0; t < GGML_TYPE_COUNT; t++) {
        const char * name = ggml_type_name((enum ggml_type) t);
        if (name && strcasecmp(name, argv[1]) == 0) {
            type = (enum ggml_type) t;
        }
    }
    if (type == GGML_TYPE_COUNT) {
        fprintf(stderr, "unknown type %s\n", argv[1]);
        return 2;
    }
    long row = atol(argv[2]);
    FILE * f = fopen(argv[3], "rb");
    if (!f) { perror(argv[3]); return 1; }
    fseek(f, 0, SEEK_END);
    long n = ftell(f) / 4;
    fseek(f, 0, SEEK_SET);
    float * x = malloc(n * sizeof(float));
    if (fread(x, 4, n, f) != (size_t) n) { perror("read"); return 1; }
    fclose(f);
    long rows = n / row;
    size_t size = ggml_row_size(type, row) * rows;
    void * out = malloc(size);
    ggml_quantize_init(type);
    size_t got = ggml_quantize_chunk(type, x, out, 0, rows, row, NULL);
    if (got != size) { fprintf(stderr, "quantized %zu bytes, want %zu\n", got, size); return 1; }
    FILE * o = fopen(argv[4], "wb");
    if (!o || fwrite(out, 1, size, o) != size) { perror(argv[4]); return 1; }
    fclose(o);
    return 0;
}
