// Package learn learns tokenizers from a corpus, so that ragforge's tiny T5
// filter and tiny BERT retriever can run on a fresh clone with no pretrained
// vocabulary (the demo) or on a user's own corpus.
//
//   - TrainUnigram learns a SentencePiece Unigram model (Kudo 2018, the EM +
//     pruning loop of sentencepiece's unigram_model_trainer.cc) with the T5
//     special ids; WriteT5Dir saves it as an HF T5Tokenizer directory.
//   - TrainWordPiece learns a BERT vocab.txt with BPE-style merges over
//     characters and "##" continuations (HF tokenizers' WordPieceTrainer);
//     WriteBERTDir saves it as an HF BertTokenizer directory.
//
// Both directories load back with tokenizer.Load. Training is deterministic:
// every tie is broken by the piece text, so the same texts and options give
// byte-identical files. The package never prints; pass an io.Writer in the
// options to receive progress lines.
package learn
