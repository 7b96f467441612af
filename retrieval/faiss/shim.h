// C interface over the faiss C++ library, used by the Go package through cgo.
//
// Every function that can fail returns NULL on success or a malloc'd error
// message that the caller frees with rf_free_str. No C++ exception crosses
// this interface.
#ifndef RAGFORGE_FAISS_SHIM_H
#define RAGFORGE_FAISS_SHIM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef void* rf_index;

// metric: 0 = inner product (faiss::METRIC_INNER_PRODUCT), 1 = L2.
char* rf_index_factory(int d, const char* description, int metric, rf_index* out);
char* rf_read_index(const char* path, rf_index* out);
char* rf_write_index(rf_index idx, const char* path);
void rf_free_index(rf_index idx);
void rf_free_str(char* s);

int rf_dim(rf_index idx);
int64_t rf_ntotal(rf_index idx);
int rf_is_trained(rf_index idx);
int rf_metric(rf_index idx);  // 0 inner product, 1 L2, -1 other

char* rf_train(rf_index idx, int64_t n, const float* x);
char* rf_add(rf_index idx, int64_t n, const float* x);
char* rf_add_with_ids(rf_index idx, int64_t n, const float* x, const int64_t* ids);
char* rf_search(rf_index idx, int64_t n, const float* x, int64_t k, float* distances, int64_t* labels);

char* rf_set_nprobe(rf_index idx, int64_t nprobe);
char* rf_set_ef_search(rf_index idx, int ef);
int64_t rf_nprobe(rf_index idx);  // -1: not an IVF index
int rf_ef_search(rf_index idx);   // -1: not an HNSW index

#ifdef __cplusplus
}
#endif

#endif
