/* A stand-in for build.sh's generated variant table (see triton_launch.h here). */
static const struct sdpa_variant kVariants[] = {
    {0, 64, sdpa_fwd_stub, load_sdpa_fwd_stub},
};
