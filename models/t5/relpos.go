package t5

import "math"

// RelativePositionBucket maps relative positions (key_pos - query_pos) to
// bucket ids, following HF T5Attention._relative_position_bucket (Raffel et
// al. 2020, §2.1, Mesh TensorFlow):
//
//   - bidirectional (encoder): half the buckets for each sign, positive offsets
//     get +numBuckets/2;
//   - unidirectional (decoder, causal): offsets > 0 map to bucket 0;
//   - of the buckets for one direction, the first half are exact offsets, the
//     rest grow logarithmically up to maxDistance, then clamp to the last bucket.
//
// The log branch is computed in float32 like HF (log(n/max_exact) /
// log(max_distance/max_exact) * (buckets - max_exact), truncated).
func RelativePositionBucket(relPos []int, bidirectional bool, numBuckets, maxDistance int) []int {
	out := make([]int, len(relPos))
	nb := numBuckets
	if bidirectional {
		nb /= 2
	}
	maxExact := nb / 2
	logRange := float32(math.Log(float64(maxDistance) / float64(maxExact)))
	for i, r := range relPos {
		b := 0
		if bidirectional {
			if r > 0 {
				b = nb
			}
			if r < 0 {
				r = -r
			}
		} else {
			r = -min(r, 0)
		}
		if r < maxExact {
			b += r
		} else {
			x := float32(math.Log(float64(float32(r) / float32(maxExact))))
			large := maxExact + int(x/logRange*float32(nb-maxExact))
			b += min(large, nb-1)
		}
		out[i] = b
	}
	return out
}

// bucketGrid returns bucket(k - (q+queryOffset)) for q in [0,qLen), k in
// [0,kLen), row-major [qLen, kLen].
func bucketGrid(qLen, kLen, queryOffset int, bidirectional bool, numBuckets, maxDistance int) []int {
	rel := make([]int, 0, qLen*kLen)
	for q := range qLen {
		for k := range kLen {
			rel = append(rel, k-(q+queryOffset))
		}
	}
	return RelativePositionBucket(rel, bidirectional, numBuckets, maxDistance)
}
