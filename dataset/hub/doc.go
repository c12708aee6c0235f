// Package hub finds evaluation data and models the way Hugging Face users
// expect: in the Hugging Face caches first, then on the hub.
//
// Configuration (LoadConfig, read through an injectable Env so tests never
// see the machine's environment): HF_HOME (default $XDG_CACHE_HOME/huggingface
// or ~/.cache/huggingface), HF_HUB_CACHE (legacy HUGGINGFACE_HUB_CACHE;
// default $HF_HOME/hub), HF_DATASETS_CACHE (default $HF_HOME/datasets),
// HF_ENDPOINT (default https://huggingface.co), HF_HUB_OFFLINE /
// HF_DATASETS_OFFLINE, HF_TOKEN (else HF_TOKEN_PATH or $HF_HOME/token).
//
// Cache layout, shared with huggingface_hub (files written by one are found by
// the other):
//
//	<hub cache>/datasets--Salesforce--wikitext/refs/main                  → <commit>
//	<hub cache>/datasets--Salesforce--wikitext/snapshots/<commit>/wikitext-2-raw-v1/test-00000-of-00001.parquet
//	    → ../../../blobs/<sha256>   (relative symlink)
//	<hub cache>/models--org--name/snapshots/<commit>/{config.json,tokenizer.json,model*.safetensors}
//
// Entry points:
//   - ResolveWikiText: --data FILE if given; else the cached parquet
//     (FindCachedWikiText: hub layout in HF_HUB_CACHE then HF_DATASETS_CACHE,
//     then the datasets library's downloads/ folder, its Arrow cache
//     .../wikitext-test.arrow, an extracted wiki.test.raw); else a download from
//     <HF_ENDPOINT>/datasets/Salesforce/wikitext/resolve/<rev>/wikitext-2-raw-v1/test-00000-of-00001.parquet
//     unless offline. Offline with nothing cached, the error lists the --data
//     forms (DataOptionsHelp).
//   - ResolveModel: a local directory unchanged; an "org/name" id from the
//     cache when complete (config.json plus all safetensors weights), else
//     downloaded (config.json, tokenizer.json, tokenizer_config.json,
//     generation_config.json, model.safetensors or the index and its shards).
//   - Client.Download: one file. HEAD on /resolve/ (relative redirects
//     followed, the CDN redirect not), X-Repo-Commit, X-Linked-Etag/ETag and
//     X-Linked-Size/Content-Length read as huggingface_hub reads them; GET into
//     blobs/<etag>.incomplete with HTTP Range resume; size and hash checked
//     (sha256 for LFS ETags, git blob sha1 for 40-hex ETags); rename to
//     blobs/<etag>; relative symlink from the snapshot (hard link or copy
//     where symlinks fail); refs/<revision> written. HF_TOKEN goes as a
//     Bearer token to the hub host only, never to the CDN. Progress (MB and
//     MB/s) is written to Client.Progress when set.
//
// Failure: HTTP errors are *HTTPError (status, X-Error-Code); a 401 says to
// set HF_TOKEN; a checksum or size mismatch removes the partial file and
// leaves nothing in the snapshot; an interrupted transfer keeps the
// .incomplete file and says to run again to resume. File names from the hub
// (index weight_map) are validated so nothing is written outside the cache.
//
// Concurrent downloads of one blob (shards of a job starting together, or a
// Python process on the same cache) serialize on an flock of
// <cache>/.locks/<repo folder>/<etag>.lock, the file huggingface_hub locks.

package hub
