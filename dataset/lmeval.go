package dataset

import (
	"regexp"
	"strings"
)

// Document is one article of lm-eval's `wikitext` task: Page is the
// `EleutherAI/wikitext_document_level` page, Detokenized the text lm-eval
// scores (wikitext_detokenizer), Words and Bytes the normalisers of
// word_perplexity and byte_perplexity/bits_per_byte, both counted on the
// original Page: len(re.split(r"\s+", page)) and len(page.encode("utf-8")).
type Document struct {
	Page        string
	Detokenized string
	Words       int
	Bytes       int
}

// Documents splits the rows of the Hugging Face `wikitext` dataset into the
// articles of `EleutherAI/wikitext_document_level`. The rows are first turned
// back into the original file (RawFromRows), which is what that dataset's
// script reads.
func Documents(rows []string) []Document { return DocumentsFromRaw(RawFromRows(rows)) }

// Documents returns the lm-eval articles of the corpus (see DocumentsFromRaw).
func (c *Corpus) Documents() []Document { return DocumentsFromRaw(c.RawText()) }

// DocumentsFromRaw splits an original WikiText file (wiki.test.raw) into the
// pages of `EleutherAI/wikitext_document_level`: the file is split on "\n";
// a line whose Python strip(), after "= = =" → "===" and "= =" → "==", starts
// with "= " and ends with " =" (a top-level heading such as " = Title = ")
// starts a new page; the lines gathered so far are joined with "\n" and kept
// when they are not blank. The last page is kept even when blank, as the
// script does.
func DocumentsFromRaw(raw string) []Document {
	d := newDetokenizer()
	lines := strings.Split(raw, "\n")
	var docs []Document
	emit := func(page string) {
		docs = append(docs, Document{
			Page:        page,
			Detokenized: d.detokenize(page),
			Words:       pySplitWhitespaceCount(page),
			Bytes:       len(page),
		})
	}
	start := 0 // index of the first line of the current page
	for i, line := range lines {
		if isTitleLine(line) {
			page := strings.Join(lines[start:i], "\n")
			if !isBlank(page) {
				emit(page)
			}
			start = i
		}
	}
	emit(strings.Join(lines[start:], "\n"))
	return docs
}

func isTitleLine(line string) bool {
	r := strings.ReplaceAll(line, "= = =", "===")
	r = strings.ReplaceAll(r, "= =", "==")
	r = pyStrip(r)
	return strings.HasPrefix(r, "= ") && strings.HasSuffix(r, " =")
}

// WikitextDetokenize is lm-eval's wikitext_detokenizer
// (lm_eval/tasks/wikitext/preprocess_wikitext.py), applied to a page.
func WikitextDetokenize(page string) string { return newDetokenizer().detokenize(page) }

type detokenizer struct {
	slashQuote, paren, bracket, brace, dquote, squote *regexp.Regexp
}

func newDetokenizer() *detokenizer {
	s := pySpaceClass
	return &detokenizer{
		slashQuote: regexp.MustCompile(`/' [0-9]/`),
		paren:      regexp.MustCompile(`\(` + s + `*([^\)]*?)` + s + `*\)`),
		bracket:    regexp.MustCompile(`\[` + s + `*([^\]]*?)` + s + `*\]`),
		brace:      regexp.MustCompile(`\{` + s + `*([^}]*?)` + s + `*\}`),
		dquote:     regexp.MustCompile(`"` + s + `*([^"]*?)` + s + `*"`),
		squote:     regexp.MustCompile(`'` + s + `*([^']*?)` + s + `*'`),
	}
}

// detokenize applies the rules in lm-eval's order. Go's regexp picks the
// same leftmost match and submatches as Python's backtracking re for these
// patterns (no backreferences), and \s is Python's Unicode whitespace class.
func (d *detokenizer) detokenize(s string) string {
	r := strings.ReplaceAll
	// contractions
	s = r(s, "s '", "s'")
	s = d.slashQuote.ReplaceAllLiteralString(s, "/'[0-9]/")
	// number separators
	s = r(s, " @-@ ", "-")
	s = r(s, " @,@ ", ",")
	s = r(s, " @.@ ", ".")
	// punctuation
	s = r(s, " : ", ": ")
	s = r(s, " ; ", "; ")
	s = r(s, " . ", ". ")
	s = r(s, " ! ", "! ")
	s = r(s, " ? ", "? ")
	s = r(s, " , ", ", ")
	// double brackets
	s = d.paren.ReplaceAllString(s, "(${1})")
	s = d.bracket.ReplaceAllString(s, "[${1}]")
	s = d.brace.ReplaceAllString(s, "{${1}}")
	s = d.dquote.ReplaceAllString(s, `"${1}"`)
	s = d.squote.ReplaceAllString(s, "'${1}'")
	// miscellaneous
	s = r(s, "= = = =", "====")
	s = r(s, "= = =", "===")
	s = r(s, "= =", "==")
	s = r(s, " \u00b0 ", "\u00b0")
	s = r(s, " \n", "\n")
	s = r(s, "\n ", "\n")
	s = r(s, " N ", " 1 ")
	s = r(s, " 's", "'s")
	return s
}
