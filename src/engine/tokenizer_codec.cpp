#include "engine/tokenizer_codec.h"

namespace ds::engine {

TokenizerCodec::TokenizerCodec(const tokenizer::Tokenizer& tok) : tok_(tok) {
  for (int32_t id : tok_.stop_ids()) eog_.insert(id);
  for (int32_t id = 0; id < tok_.n_vocab(); id++)
    if (tok_.is_control(id) && !tok_.token_bytes(id).empty()) control_texts_.push_back(tok_.token_bytes(id));
}

}  // namespace ds::engine
