// TGCrypto — placeholder until the module lands; replaced by its real sources.
