/* Quantizes raw float32 rows with libggml's ggml_quantize_chunk (no
 * imatrix: the reference kernels llama-quantize runs), or with -d
 * dequantizes rows of blocks with the type's to_float (the
 * dequantize_row_* reference), for interop/test_gguf.py to compare with
 * mtpconv's Go kernels.
 * usage: ggml_quant [-d] TYPE ROWLEN IN OUT */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "ggml.h"

int main(int argc, char ** argv) {
    int dequant = argc == 6 && strcmp(argv[1], "-d") == 0;
    if (dequant) {
        argv++;
        argc--;
    }
    if (argc != 5) {
        fprintf(stderr, "usage: ggml_quant [-d] TYPE ROWLEN IN OUT\n");
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
    long bytes = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (dequant) {
        long rows = bytes / (long) ggml_row_size(type, row);
        void * in = malloc(bytes);
        if (fread(in, 1, bytes, f) != (size_t) bytes) { perror("read"); return 1; }
        fclose(f);
        float * y = malloc(rows * row * sizeof(float));
        ggml_get_type_traits(type)->to_float(in, y, rows * row);
        FILE * o = fopen(argv[4], "wb");
        if (!o || fwrite(y, 4, rows * row, o) != (size_t) (rows * row)) { perror(argv[4]); return 1; }
        fclose(o);
        return 0;
    }
    long n = bytes / 4;
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
