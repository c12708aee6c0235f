package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/qppl/qppl/dataset"
	"github.com/qppl/qppl/tokenizer"
)

// tokenizeOptions are the flags of `qppl tokenize`.
type tokenizeOptions struct {
	Tokenizer   string // tokenizer.json or a model directory
	Text        string // --text FILE (encode); "-" reads Stdin
	Stdin       io.Reader
	Special     bool   // add_special_tokens
	Out         string // --out FILE.i32 (encode)
	Decode      bool
	Tokens      string // --tokens FILE.i32 (decode)
	SkipSpecial bool   // decode: leave special tokens out
}

func newTokenizeCmd() *cli.Command {
	return &cli.Command{
		Name:  "tokenize",
		Usage: "encode a text file to int32 token ids, or decode ids to text, exactly as Hugging Face tokenizers",
		UsageText: "qppl tokenize --tokenizer FILE_OR_MODEL_DIR --text FILE [--special] --out FILE.i32\n" +
			"qppl tokenize --decode --tokenizer FILE_OR_MODEL_DIR --tokens FILE.i32 [--skip-special]",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "tokenizer", Usage: "tokenizer.json, or a model directory holding it (and tokenizer_config.json)"},
			&cli.StringFlag{Name: "text", Usage: "UTF-8 text file to encode (- reads standard input)"},
			&cli.BoolFlag{Name: "special", Usage: "add special tokens (BOS, ...) as add_special_tokens=True does"},
			&cli.StringFlag{Name: "out", Usage: "output token file (int32 little-endian), written atomically"},
			&cli.BoolFlag{Name: "decode", Usage: "decode --tokens to text on stdout instead of encoding"},
			&cli.StringFlag{Name: "tokens", Usage: "int32 little-endian token file to decode"},
			&cli.BoolFlag{Name: "skip-special", Usage: "decode: leave special tokens out"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageErr(fmt.Errorf("tokenize: unexpected argument %q", c.Args().First()))
			}
			o := tokenizeOptions{
				Tokenizer: c.String("tokenizer"), Text: c.String("text"), Special: c.Bool("special"),
				Out: c.String("out"), Decode: c.Bool("decode"), Tokens: c.String("tokens"),
				SkipSpecial: c.Bool("skip-special"), Stdin: c.App.Reader,
			}
			return tokenizeRun(o, c.App.Writer, c.App.ErrWriter)
		},
	}
}

func tokenizeRun(o tokenizeOptions, stdout, stderr io.Writer) error {
	if o.Tokenizer == "" {
		return usageErr(errors.New("tokenize: --tokenizer FILE_OR_MODEL_DIR is required"))
	}
	if o.Decode {
		if o.Tokens == "" {
			return usageErr(errors.New("tokenize --decode: --tokens FILE.i32 is required"))
		}
		if o.Text != "" || o.Out != "" || o.Special {
			return usageErr(errors.New("tokenize --decode: --text, --out and --special only apply to encoding"))
		}
	} else {
		if o.Text == "" || o.Out == "" {
			return usageErr(errors.New("tokenize: --text FILE and --out FILE.i32 are required (or --decode with --tokens)"))
		}
		if o.Tokens != "" || o.SkipSpecial {
			return usageErr(errors.New("tokenize: --tokens and --skip-special only apply to --decode"))
		}
		if err := checkOutputDirs("tokenize", map[string]string{"out": o.Out}, ""); err != nil {
			return usageErr(err)
		}
	}
	tk, err := tokenizer.Load(o.Tokenizer)
	if err != nil {
		return usageErr(err)
	}
	if o.Decode {
		ids, err := dataset.ReadTokens(o.Tokens)
		if err != nil {
			return usageErr(err)
		}
		for i, id := range ids {
			if _, ok := tk.IDToToken(id); !ok {
				return usageErr(fmt.Errorf("tokenize: %s: token %d (index %d) is not in the tokenizer's vocabulary (size %d)", o.Tokens, id, i, tk.VocabSize()))
			}
		}
		_, err = io.WriteString(stdout, tk.Decode(ids, o.SkipSpecial))
		return err
	}
	var text []byte
	if o.Text == stdoutPath && o.Stdin != nil {
		text, err = io.ReadAll(o.Stdin)
	} else {
		text, err = os.ReadFile(o.Text)
	}
	if err != nil {
		return usageErr(fmt.Errorf("tokenize: %w", err))
	}
	if err := dataset.CheckUTF8(o.Text, text); err != nil {
		return usageErr(fmt.Errorf("tokenize: %w", err))
	}
	ids := tk.Encode(string(text), o.Special)
	if err := dataset.WriteTokens(o.Out, ids); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "qppl tokenize: %d bytes -> %d tokens -> %s\n", len(text), len(ids), o.Out)
	return nil
}
