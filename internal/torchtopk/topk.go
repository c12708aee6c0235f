// Package torchtopk chooses the k largest of a row of values in the order
// torch.topk returns them on the CPU, ties included, so that a mixture of
// experts routes a tied row as transformers does.
//
// torch.topk(x, k, largest=True, sorted=True) on the CPU
// (pytorch aten/src/ATen/native/TopKImpl.h, topk_impl_loop) fills a queue
// of (value, index) pairs in index order and, with the comparator
// "x.first > y.first" (values only: the order of equal values is whatever
// the algorithm leaves), runs
//
//   - std::partial_sort(queue, queue+k, end) when k·64 ≤ n, else
//   - std::nth_element(queue, queue+k-1, end), then std::sort(queue,
//     queue+k-1),
//
// and returns the first k indices. This package runs the same steps as
// libstdc++ implements them (bits/stl_algo.h: __introselect,
// __unguarded_partition_pivot, __move_median_to_first,
// __unguarded_partition, __insertion_sort, __unguarded_linear_insert,
// __introsort_loop, __final_insertion_sort, __heap_select; bits/stl_heap.h:
// __make_heap, __adjust_heap, __push_heap, __pop_heap, __sort_heap), so
// ties come out as torch's do (checked against torch 1.13's CPU topk in the
// tests). torch's CUDA topk (a radix select) may order ties otherwise;
// values here are float64 where torch compares float32 or bf16, so only
// exactly equal float64 values tie. No NaN is expected (probabilities).
package torchtopk

// elem is one queue entry: a value and its index.
type elem struct {
	v float64
	i int
}

// q is the queue; less is the comparator ("x.first > y.first").
type q []elem

func (s q) less(a, b elem) bool { return a.v > b.v }

// Indices returns the indices of the k largest values of x in the order
// torch.topk returns them (0 < k ≤ len(x)).
func Indices(x []float64, k int) []int {
	s := make(q, len(x))
	for i, v := range x {
		s[i] = elem{v, i}
	}
	n := len(s)
	if k <= 0 || k > n {
		panic("torchtopk: k out of range")
	}
	if k*64 <= n {
		s.partialSort(0, k, n)
	} else {
		s.nthElement(0, k-1, n)
		s.sort(0, k-1)
	}
	out := make([]int, k)
	for j := range out {
		out[j] = s[j].i
	}
	return out
}

// lg is std::__lg: floor(log2(n)), n > 0.
func lg(n int) int {
	r := -1
	for ; n > 0; n >>= 1 {
		r++
	}
	return r
}

// nthElement is std::nth_element(first, nth, last).
func (s q) nthElement(first, nth, last int) {
	if first == last || nth == last {
		return
	}
	s.introselect(first, nth, last, 2*lg(last-first))
}

func (s q) introselect(first, nth, last, depth int) {
	for last-first > 3 {
		if depth == 0 {
			s.heapSelect(first, nth+1, last)
			s[first], s[nth] = s[nth], s[first]
			return
		}
		depth--
		cut := s.unguardedPartitionPivot(first, last)
		if cut <= nth {
			first = cut
		} else {
			last = cut
		}
	}
	s.insertionSort(first, last)
}

func (s q) unguardedPartitionPivot(first, last int) int {
	mid := first + (last-first)/2
	s.moveMedianToFirst(first, first+1, mid, last-1)
	return s.unguardedPartition(first+1, last, first)
}

func (s q) moveMedianToFirst(result, a, b, c int) {
	switch {
	case s.less(s[a], s[b]):
		switch {
		case s.less(s[b], s[c]):
			s[result], s[b] = s[b], s[result]
		case s.less(s[a], s[c]):
			s[result], s[c] = s[c], s[result]
		default:
			s[result], s[a] = s[a], s[result]
		}
	case s.less(s[a], s[c]):
		s[result], s[a] = s[a], s[result]
	case s.less(s[b], s[c]):
		s[result], s[c] = s[c], s[result]
	default:
		s[result], s[b] = s[b], s[result]
	}
}

func (s q) unguardedPartition(first, last, pivot int) int {
	for {
		for s.less(s[first], s[pivot]) {
			first++
		}
		last--
		for s.less(s[pivot], s[last]) {
			last--
		}
		if !(first < last) {
			return first
		}
		s[first], s[last] = s[last], s[first]
		first++
	}
}

func (s q) insertionSort(first, last int) {
	if first == last {
		return
	}
	for i := first + 1; i < last; i++ {
		if s.less(s[i], s[first]) {
			v := s[i]
			copy(s[first+1:i+1], s[first:i])
			s[first] = v
		} else {
			s.unguardedLinearInsert(i)
		}
	}
}

func (s q) unguardedLinearInsert(last int) {
	v := s[last]
	next := last - 1
	for s.less(v, s[next]) {
		s[last] = s[next]
		last = next
		next--
	}
	s[last] = v
}

// sort is std::sort(first, last).
func (s q) sort(first, last int) {
	if first == last {
		return
	}
	s.introsortLoop(first, last, 2*lg(last-first))
	s.finalInsertionSort(first, last)
}

const threshold = 16 // _S_threshold

func (s q) introsortLoop(first, last, depth int) {
	for last-first > threshold {
		if depth == 0 {
			s.partialSort(first, last, last)
			return
		}
		depth--
		cut := s.unguardedPartitionPivot(first, last)
		s.introsortLoop(cut, last, depth)
		last = cut
	}
}

func (s q) finalInsertionSort(first, last int) {
	if last-first > threshold {
		s.insertionSort(first, first+threshold)
		for i := first + threshold; i < last; i++ {
			s.unguardedLinearInsert(i)
		}
		return
	}
	s.insertionSort(first, last)
}

// partialSort is std::partial_sort(first, middle, last).
func (s q) partialSort(first, middle, last int) {
	s.heapSelect(first, middle, last)
	for middle-first > 1 { // __sort_heap
		middle--
		s.popHeap(first, middle, middle)
	}
}

func (s q) heapSelect(first, middle, last int) {
	s.makeHeap(first, middle)
	for i := middle; i < last; i++ {
		if s.less(s[i], s[first]) {
			s.popHeap(first, middle, i)
		}
	}
}

func (s q) makeHeap(first, last int) {
	n := last - first
	if n < 2 {
		return
	}
	for parent := (n - 2) / 2; ; parent-- {
		s.adjustHeap(first, parent, n, s[first+parent])
		if parent == 0 {
			return
		}
	}
}

func (s q) popHeap(first, last, result int) {
	v := s[result]
	s[result] = s[first]
	s.adjustHeap(first, 0, last-first, v)
}

func (s q) adjustHeap(first, hole, n int, v elem) {
	top, child := hole, hole
	for child < (n-1)/2 {
		child = 2 * (child + 1)
		if s.less(s[first+child], s[first+child-1]) {
			child--
		}
		s[first+hole] = s[first+child]
		hole = child
	}
	if n&1 == 0 && child == (n-2)/2 {
		child = 2 * (child + 1)
		s[first+hole] = s[first+child-1]
		hole = child - 1
	}
	parent := (hole - 1) / 2 // __push_heap
	for hole > top && s.less(s[first+parent], v) {
		s[first+hole] = s[first+parent]
		hole = parent
		parent = (hole - 1) / 2
	}
	s[first+hole] = v
}
