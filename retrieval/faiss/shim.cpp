// Implementation of shim.h. Each entry point catches every C++ exception and
// turns it into an error string, so that none unwinds into Go.
#include "shim.h"

#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include <faiss/IVFlib.h>
#include <faiss/Index.h>
#include <faiss/IndexHNSW.h>
#include <faiss/IndexIDMap.h>
#include <faiss/IndexIVF.h>
#include <faiss/IndexPreTransform.h>
#include <faiss/index_factory.h>
#include <faiss/index_io.h>
#include <faiss/impl/FaissException.h>
#include <omp.h>

namespace {

// OpenMP's default thread count, read once at load time (OMP_NUM_THREADS
// or the cores), before rf_search changes the calling thread's setting.
const int default_threads = omp_get_max_threads();

// Searches below this many multiply-adds (queries × vectors × dim, ~20 ms
// on one core) run on the calling thread. libgomp's workers busy-wait for a
// while after every parallel region; after the many small searches of a
// self-learning round (generator selection, hard-negative mining) that
// spinning took 7% of the process's CPU and competed with the model's own
// threads for the cores. Exact and per-query searches give the same results
// on any number of threads.
constexpr double min_parallel_work = 1 << 26;

int search_threads(const faiss::Index* index, int64_t n) {
    double work = static_cast<double>(n) * static_cast<double>(index->ntotal) * index->d;
    return work < min_parallel_work ? 1 : default_threads;
}

char* dup_str(const std::string& s) {
    char* out = static_cast<char*>(std::malloc(s.size() + 1));
    if (out == nullptr) return nullptr;
    std::memcpy(out, s.c_str(), s.size() + 1);
    return out;
}

template <typename F>
char* guard(F&& f) {
    try {
        f();
        return nullptr;
    } catch (const faiss::FaissException& e) {
        return dup_str(e.what());
    } catch (const std::exception& e) {
        return dup_str(std::string("C++ exception: ") + e.what());
    } catch (...) {
        return dup_str("unknown C++ exception");
    }
}

faiss::Index* as_index(rf_index idx) { return static_cast<faiss::Index*>(idx); }

// unwrap strips IndexPreTransform and IndexIDMap wrappers.
faiss::Index* unwrap(faiss::Index* idx) {
    for (;;) {
        if (auto* pt = dynamic_cast<faiss::IndexPreTransform*>(idx)) {
            idx = pt->index;
        } else if (auto* im = dynamic_cast<faiss::IndexIDMap*>(idx)) {
            idx = im->index;
        } else {
            return idx;
        }
    }
}

}  // namespace

extern "C" {

char* rf_index_factory(int d, const char* description, int metric, rf_index* out) {
    *out = nullptr;
    return guard([&] {
        faiss::MetricType m = metric == 1 ? faiss::METRIC_L2 : faiss::METRIC_INNER_PRODUCT;
        *out = faiss::index_factory(d, description, m);
    });
}

char* rf_read_index(const char* path, rf_index* out) {
    *out = nullptr;
    return guard([&] { *out = faiss::read_index(path); });
}

char* rf_write_index(rf_index idx, const char* path) {
    return guard([&] { faiss::write_index(as_index(idx), path); });
}

void rf_free_index(rf_index idx) {
    try {
        delete as_index(idx);
    } catch (...) {
    }
}

void rf_free_str(char* s) { std::free(s); }

int rf_dim(rf_index idx) { return as_index(idx)->d; }
int64_t rf_ntotal(rf_index idx) { return as_index(idx)->ntotal; }
int rf_is_trained(rf_index idx) { return as_index(idx)->is_trained ? 1 : 0; }

int rf_metric(rf_index idx) {
    switch (as_index(idx)->metric_type) {
        case faiss::METRIC_INNER_PRODUCT:
            return 0;
        case faiss::METRIC_L2:
            return 1;
        default:
            return -1;
    }
}

char* rf_train(rf_index idx, int64_t n, const float* x) {
    return guard([&] { as_index(idx)->train(n, x); });
}

char* rf_add(rf_index idx, int64_t n, const float* x) {
    return guard([&] { as_index(idx)->add(n, x); });
}

char* rf_add_with_ids(rf_index idx, int64_t n, const float* x, const int64_t* ids) {
    return guard([&] { as_index(idx)->add_with_ids(n, x, ids); });
}

char* rf_search(rf_index idx, int64_t n, const float* x, int64_t k, float* distances, int64_t* labels) {
    return guard([&] {
        faiss::Index* index = as_index(idx);
        const int prev = omp_get_max_threads();
        omp_set_num_threads(search_threads(index, n));
        try {
            index->search(n, x, k, distances, labels);
        } catch (...) {
            omp_set_num_threads(prev);
            throw;
        }
        omp_set_num_threads(prev);
    });
}

char* rf_set_nprobe(rf_index idx, int64_t nprobe) {
    return guard([&] {
        faiss::IndexIVF* ivf = faiss::ivflib::try_extract_index_ivf(as_index(idx));
        if (ivf == nullptr) {
            throw faiss::FaissException("nprobe: index is not an IVF index");
        }
        ivf->nprobe = static_cast<size_t>(nprobe);
    });
}

char* rf_set_ef_search(rf_index idx, int ef) {
    return guard([&] {
        auto* h = dynamic_cast<faiss::IndexHNSW*>(unwrap(as_index(idx)));
        if (h == nullptr) {
            throw faiss::FaissException("efSearch: index is not an HNSW index");
        }
        h->hnsw.efSearch = ef;
    });
}

int64_t rf_nprobe(rf_index idx) {
    try {
        faiss::IndexIVF* ivf = faiss::ivflib::try_extract_index_ivf(as_index(idx));
        return ivf == nullptr ? -1 : static_cast<int64_t>(ivf->nprobe);
    } catch (...) {
        return -1;
    }
}

int rf_ef_search(rf_index idx) {
    auto* h = dynamic_cast<faiss::IndexHNSW*>(unwrap(as_index(idx)));
    return h == nullptr ? -1 : h->hnsw.efSearch;
}

}  // extern "C"
