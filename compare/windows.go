package compare

import (
	"fmt"

	"github.com/qppl/qppl/backends"
)

// Method is a windowing method: how a token stream is cut into windows and
// which positions of each window are scored.
type Method string

// The windowing methods (methodology.md §1-3).
const (
	// MethodCompareQ is ExLlamaV3 compare_q "classic": windows [a, a+ctx)
	// for a in range(0, n-ctx, stride), at most rows, every target 1..ctx-1
	// scored; BOS appears once, at corpus start, from the tokenizer.
	MethodCompareQ Method = "compare_q"
	// MethodEXL3 is ExLlamaV3 eval/ppl.py: the compare_q loop with
	// stride = ctx (non-overlapping rows), tokens without special tokens.
	MethodEXL3 Method = "exl3-ppl"
	// MethodLlamaCpp is llama-perplexity: n/ctx disjoint chunks (at most
	// rows), the first token of each replaced by BOS, targets
	// ctx/2+1 … ctx-1 scored (logits positions ctx/2 … ctx-2).
	MethodLlamaCpp Method = "llamacpp"
	// MethodHFStrided is the Hugging Face guide "Perplexity of fixed-length
	// models": windows [b, min(b+ctx, n)) for b in range(0, n, stride) until
	// one reaches n, scoring only the tokens after the previous window's end.
	MethodHFStrided Method = "hf-strided"
	// MethodLMEval is lm-eval's loglikelihood_rolling per document (see
	// LMEvalWindows).
	MethodLMEval Method = "lm-eval"
)

// Methods lists the methods in documentation order.
var methods = []Method{MethodCompareQ, MethodEXL3, MethodLlamaCpp, MethodHFStrided, MethodLMEval}

// Methods returns the known methods.
func Methods() []Method { return append([]Method(nil), methods...) }

// ParseMethod returns the Method named s ("" gives compare_q).
func ParseMethod(s string) (Method, error) {
	if s == "" {
		return MethodCompareQ, nil
	}
	for _, m := range methods {
		if string(m) == s {
			return m, nil
		}
	}
	return "", fmt.Errorf("unknown method %q (want compare_q, exl3-ppl, llamacpp, hf-strided or lm-eval)", s)
}

// AddSpecialTokens reports whether the method's reference tokenizes the
// corpus with add_special_tokens=True (compare_q, hf-strided, llamacpp) or
// without (exl3-ppl; lm-eval adds its own prefix token per document).
func (m Method) AddSpecialTokens() bool {
	switch m {
	case MethodEXL3, MethodLMEval:
		return false
	}
	return true
}

// UsesStride reports whether the method reads the stride option.
func (m Method) UsesStride() bool { return m == MethodCompareQ || m == MethodHFStrided }

// WindowOptions select and size the windows of a token stream.
type WindowOptions struct {
	Method Method
	Ctx    int // window length in tokens
	Stride int // compare_q, hf-strided
	Rows   int // at most this many windows (lm-eval: documents); 0 = all
	// BOS is the id that replaces the first token of each llamacpp chunk
	// (llama.cpp does so when the vocabulary adds BOS); -1 = no replacement.
	BOS int32
}

// Windows cuts tokens into the windows of o.Method (every method but
// lm-eval, which needs documents: see LMEvalWindows). The windows' Tokens
// alias tokens (except llamacpp, whose first token is replaced, which get a
// copy); callers must not modify them. Window.Index is 0, 1, 2, ….
//
// Errors name the offending option: ctx < 2, stride < 1, ctx larger than
// the stream, or more rows than the stream holds.
func Windows(tokens []int32, o WindowOptions) ([]backends.Window, error) {
	n := len(tokens)
	if o.Ctx < 2 {
		return nil, fmt.Errorf("ctx %d: need at least 2 tokens per window", o.Ctx)
	}
	if o.Rows < 0 {
		return nil, fmt.Errorf("rows %d: must be >= 0 (0 = all)", o.Rows)
	}
	var ws []backends.Window
	switch o.Method {
	case MethodCompareQ, MethodEXL3:
		stride := o.Stride
		if o.Method == MethodEXL3 {
			stride = o.Ctx
		}
		if stride < 1 {
			return nil, fmt.Errorf("stride %d: must be >= 1", stride)
		}
		if n-o.Ctx <= 0 {
			return nil, fmt.Errorf("ctx %d needs more than %d tokens, but the token stream has %d: no window fits (%s windows need n > ctx)", o.Ctx, o.Ctx, n, o.Method)
		}
		// for a in range(0, n - ctx, stride): the window ending exactly at
		// n is excluded, as Python's range excludes its stop.
		avail := (n - o.Ctx + stride - 1) / stride
		if err := checkRows(o, avail, n); err != nil {
			return nil, err
		}
		count := avail
		if o.Rows > 0 {
			count = o.Rows
		}
		ws = make([]backends.Window, count)
		for i := range ws {
			a := i * stride
			ws[i] = backends.Window{Index: i, Tokens: tokens[a : a+o.Ctx : a+o.Ctx], First: 1}
		}
	case MethodLlamaCpp:
		if n < 2*o.Ctx {
			return nil, fmt.Errorf("ctx %d: llamacpp needs at least 2*ctx = %d tokens, the token stream has %d", o.Ctx, 2*o.Ctx, n)
		}
		avail := n / o.Ctx
		if err := checkRows(o, avail, n); err != nil {
			return nil, err
		}
		count := avail
		if o.Rows > 0 {
			count = o.Rows
		}
		first := o.Ctx/2 + 1 // logits position ctx/2 predicts target ctx/2+1
		ws = make([]backends.Window, count)
		for i := range ws {
			w := make([]int32, o.Ctx)
			copy(w, tokens[i*o.Ctx:])
			if o.BOS >= 0 {
				w[0] = o.BOS
			}
			ws[i] = backends.Window{Index: i, Tokens: w, First: first}
		}
	case MethodHFStrided:
		if o.Stride < 1 {
			return nil, fmt.Errorf("stride %d: must be >= 1", o.Stride)
		}
		if o.Stride > o.Ctx {
			return nil, fmt.Errorf("stride %d is larger than ctx %d: hf-strided would skip tokens", o.Stride, o.Ctx)
		}
		if n < 2 {
			return nil, fmt.Errorf("token stream has %d tokens: need at least 2", n)
		}
		prevEnd := 0
		for begin := 0; begin < n; begin += o.Stride {
			if o.Rows > 0 && len(ws) == o.Rows {
				break
			}
			end := min(begin+o.Ctx, n)
			trg := end - prevEnd // labels before the last trg are -100
			first := max(1, end-begin-trg)
			ws = append(ws, backends.Window{Index: len(ws), Tokens: tokens[begin:end:end], First: first})
			prevEnd = end
			if end == n {
				break
			}
		}
		if o.Rows > 0 && len(ws) < o.Rows {
			return nil, fmt.Errorf("rows %d is beyond the token stream: %d tokens give only %d hf-strided windows of ctx %d stride %d", o.Rows, n, len(ws), o.Ctx, o.Stride)
		}
	case MethodLMEval:
		return nil, fmt.Errorf("method lm-eval needs documents: use LMEvalWindows")
	default:
		return nil, fmt.Errorf("unknown method %q", o.Method)
	}
	return ws, nil
}

func checkRows(o WindowOptions, avail, n int) error {
	if o.Rows > avail {
		what := fmt.Sprintf("ctx %d", o.Ctx)
		if o.Method == MethodCompareQ {
			what += fmt.Sprintf(" stride %d", o.Stride)
		}
		return fmt.Errorf("rows %d is beyond the token stream: %d tokens give only %d %s windows of %s", o.Rows, n, avail, o.Method, what)
	}
	return nil
}

// ScoredTokens returns Σ NumTargets over ws.
func ScoredTokens(ws []backends.Window) int64 {
	var s int64
	for _, w := range ws {
		s += int64(w.NumTargets())
	}
	return s
}

// Document is one lm-eval document: its token ids (tokenized without
// special tokens) and the word and byte counts of its original page text
// (lm-eval counts both on the un-detokenized page: len(re.split(r"\s+", page)) and its UTF-8 bytes).
type Document struct {
	Tokens []int32
	Words  int
	Bytes  int
}

// LMEvalWindows builds lm-eval's loglikelihood_rolling windows for each
// document (lm_eval/utils.py get_rolling_token_windows with context_len=1,
// then make_disjoint_window), with max_seq_len = ctx:
//
//   - the first window is [prefix] + toks[:L] scoring toks[:L] (L =
//     min(ctx, len)), i.e. Tokens = prefix+toks[:L], First = 1;
//   - every further block predicts the next min(ctx, remaining) tokens
//     with the preceding tokens as context so the model input is ctx long
//     (one context token for a full block, more for the final partial one).
//
// A window holds its model input plus the last target (len = input+1); the
// logits of that last position are unused. docOf[i] is the document index
// of window i. At most rows documents are used (0 = all); empty documents
// give no window, as in lm-eval.
func LMEvalWindows(docs []Document, ctx int, prefix int32, rows int) (ws []backends.Window, docOf []int, err error) {
	if ctx < 1 {
		return nil, nil, fmt.Errorf("ctx %d: must be >= 1", ctx)
	}
	if rows < 0 {
		return nil, nil, fmt.Errorf("rows %d: must be >= 0 (0 = all)", rows)
	}
	if rows > len(docs) {
		return nil, nil, fmt.Errorf("rows %d is beyond the data: only %d documents", rows, len(docs))
	}
	if rows > 0 {
		docs = docs[:rows]
	}
	for d, doc := range docs {
		toks := doc.Tokens
		if len(toks) == 0 {
			continue
		}
		l := min(ctx, len(toks))
		first := make([]int32, 0, l+1)
		first = append(first, prefix)
		first = append(first, toks[:l]...)
		ws = append(ws, backends.Window{Index: len(ws), Tokens: first, First: 1})
		docOf = append(docOf, d)
		for predicted := l; predicted < len(toks); {
			pl := min(len(toks)-predicted, ctx)
			end := predicted + pl
			start := end - ctx - 1 // input toks[end-ctx-1 : end-1] plus last target
			ws = append(ws, backends.Window{Index: len(ws), Tokens: toks[start:end:end], First: ctx + 1 - pl})
			docOf = append(docOf, d)
			predicted = end
		}
	}
	if len(ws) == 0 {
		return nil, nil, fmt.Errorf("lm-eval: no tokens in %d documents", len(docs))
	}
	return ws, docOf, nil
}
