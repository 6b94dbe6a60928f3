/* SPDX-License-Identifier: Apache-2.0 */
/* `trellis info PATH --plan [--max-m M]`: per EXL3 layer the path each m
 * takes and the caller buffers a run needs, then what one stream of the
 * model must provision: the weights, and each buffer's largest size over
 * the layers (they run in sequence and share one set of buffers).
 *
 * Plans are created from device memory, so this needs a CUDA device. A
 * plan depends on a layer's shape, K, codebook, sign forms and bias, never
 * on its values: layers alike in all of these share one uploaded weight
 * and one plan ("kind"), so a model's report needs a few uploads, not the
 * model on the device.
 *
 * With --gpu NAME no device is used: each kind gets the plan the library's
 * pure rules would make on that target (cli_gpu_target.c), and the report
 * says its sizes are estimates. */
#include "cli_util.h"

#include <stdlib.h>
#include <string.h>

#define DEFAULT_MAX_M 256
#define MOST_MAX_M 65536

/* Layers that plan alike: everything trellis_plan_create reads. */
typedef struct kind {
  trellis_layer_info key;
  trellis_device_weight *dw;
  trellis_plan *plan;        /* NULL: the layer runs on the CPU only */
  cli_target_plan *estimate; /* --gpu NAME: the rules' plan instead */
  char why[160];             /* why there is no plan */
  size_t layers;             /* how many layers are of this kind */
} kind;

static int same_kind(const trellis_layer_info *a, const trellis_layer_info *b) {
  return a->k == b->k && a->n == b->n && a->bits == b->bits &&
         a->codebook == b->codebook && a->input_signs == b->input_signs &&
         a->output_signs == b->output_signs && a->has_bias == b->has_bias &&
         a->pair == b->pair && a->rate_axis == b->rate_axis;
}

/* A name as printed (cli_escape), padded to `width` columns. */
static void print_name(const char *s, int width) {
  char buf[1024];
  int len = printf("%s", cli_escape(s, buf, sizeof buf));
  printf("%*s", len < width ? width - len : 0, "");
}

/* Uploads layer i and plans it; an unsupported layer gets no plan. With a
 * target, the rules' plan instead (nothing uploaded). */
static int make_kind(const trellis_model *model, size_t i, int64_t max_m,
                     const cli_gpu_target *target, kind *out) {
  if (target) {
    if (!(out->estimate = cli_target_plan_make(target, &out->key, max_m))) {
      cli_error("%s: out of host memory", out->key.name);
      return CLI_FAIL;
    }
    return CLI_OK;
  }
  trellis_layer layer;
  trellis_clear_error();
  trellis_status st = trellis_model_layer(model, i, &layer);
  if (st != TRELLIS_OK)
    return cli_lib_error(st, out->key.name);
  trellis_plan_desc desc;
  trellis_plan_desc_init(&desc);
  desc.max_m = max_m;
  if ((st = trellis_weight_upload(&layer.weight, &out->dw)) != TRELLIS_OK)
    return cli_lib_error(st, out->key.name);
  st = trellis_plan_create(trellis_device_weight_view(out->dw), &desc,
                           &out->plan);
  if (st == TRELLIS_ERR_UNSUPPORTED) {
    snprintf(out->why, sizeof out->why, "cpu only");
    return CLI_OK;
  }
  if (st != TRELLIS_OK)
    return cli_lib_error(st, out->key.name);
  return CLI_OK;
}

/* Whether the kind has a plan (on the device or from the rules). */
static int planned(const kind *kd) { return kd->plan || kd->estimate; }

static int query(const kind *kd, int64_t m, trellis_buffer_sizes *sz) {
  memset(sz, 0, sizeof *sz);
  sz->struct_size = sizeof *sz;
  if (kd->estimate) {
    if (cli_target_plan_query(kd->estimate, m, sz))
      return CLI_OK;
    cli_error("%s: --gpu: buffer sizes overflow at m = %lld", kd->key.name,
              (long long)m);
    return CLI_FAIL;
  }
  trellis_clear_error();
  trellis_status st = trellis_plan_query(kd->plan, m, sz);
  return st == TRELLIS_OK ? CLI_OK : cli_lib_error(st, kd->key.name);
}

static void print_sizes(const trellis_buffer_sizes *sz) {
  printf(" %12zu %10zu %10zu %12zu", sz->rotated_bytes, sz->input_f16_bytes,
         sz->output_f16_bytes, sz->workspace_bytes);
}

/* Each buffer's largest size over the kinds' plans at m: on the device
 * trellis_plans_buffer_sizes (the call an engine makes), with a target
 * the same maximum over the rules' plans. */
static int max_sizes(const char *path, const kind *kinds, size_t nkinds,
                     const trellis_plan **plans, size_t nplans, int64_t m,
                     trellis_buffer_sizes *max) {
  if (nkinds == 0 || !kinds[0].estimate) {
    trellis_clear_error();
    trellis_status st = trellis_plans_buffer_sizes(plans, nplans, m, max);
    return st == TRELLIS_OK ? CLI_OK : cli_lib_error(st, path);
  }
  memset(max, 0, sizeof *max);
  max->struct_size = sizeof *max;
  for (size_t i = 0; i < nkinds; i++) {
    trellis_buffer_sizes one;
    if (query(&kinds[i], m, &one) != CLI_OK)
      return CLI_FAIL;
#define MAX_FIELD(f) max->f = one.f > max->f ? one.f : max->f
    MAX_FIELD(rotated_bytes);
    MAX_FIELD(input_f16_bytes);
    MAX_FIELD(output_f16_bytes);
    MAX_FIELD(workspace_bytes);
#undef MAX_FIELD
  }
  return CLI_OK;
}

static int report(const char *path, const trellis_model *model, int64_t max_m,
                  const cli_gpu_target *target, kind *kinds, size_t nkinds,
                  const size_t *kind_of, const trellis_plan **plans,
                  size_t nplans) {
  const size_t count = trellis_model_layer_count(model);
  int64_t ms[6];
  int nm = 0;
  static const int64_t picks[] = {1, 8, 16, 32, 128};
  for (size_t i = 0; i < 5; i++)
    if (picks[i] < max_m)
      ms[nm++] = picks[i];
  ms[nm++] = max_m;

  char device[256] = "";
  if (target)
    snprintf(device, sizeof device, "estimates for %s (--gpu %s)", target->what,
             target->name);
  else
    cli_gpu_device_name(device, sizeof device);
  char shown[1024];
  printf("%s\n", cli_escape(path, shown, sizeof shown));
  printf("plans: max_m %lld, fp16 input, output and compute, default flags; "
         "%s; %zu plan%s for %zu layers (layers alike in shape, K, "
         "codebook, signs and bias share one)\n",
         (long long)max_m, device, nplans, nplans == 1 ? "" : "s", count);
  if (target)
    printf("note: no GPU was used: these are the library's plan rules for "
           "the target with the defaults they take when the GPU is unknown "
           "(2 decode-GEMM CTAs per SM, the register-direct kernel's launch "
           "bounds, every cluster size fitting) and a build with a kernel "
           "image for sm_%d%d; a plan on the GPU itself may choose other "
           "k-splits and so another workspace\n",
           target->cc_major, target->cc_minor);

  int width = 5;
  for (size_t i = 0; i < count; i++) {
    trellis_layer_info l;
    char buf[1024];
    if (trellis_model_layer_info(model, i, &l) == TRELLIS_OK &&
        (int)strlen(cli_escape(l.name, buf, sizeof buf)) > width)
      width = (int)strlen(buf);
  }
  printf("\n%-*s %6s %6s %-5s %-8s %6s %-8s %12s %10s %10s %12s\n", width,
         "layer", "k", "n", "K", "codebook", "m", "path", "rotated",
         "input_f16", "output_f16", "workspace");
  size_t weight_bytes = 0;
  for (size_t i = 0; i < count; i++) {
    trellis_layer_info l;
    trellis_status st = trellis_model_layer_info(model, i, &l);
    if (st != TRELLIS_OK)
      return cli_lib_error(st, path);
    weight_bytes += cli_layer_bytes(&l);
    const kind *kd = &kinds[kind_of[i]];
    char bits[16];
    if (l.pair != TRELLIS_PAIR_NONE)
      snprintf(bits, sizeof bits, "%s/%s", trellis_pair_kind_name(l.pair),
               trellis_rate_axis_name(l.rate_axis));
    else
      snprintf(bits, sizeof bits, "%d", l.bits);
    for (int j = 0; j < (planned(kd) ? nm : 1); j++) {
      if (j == 0) {
        print_name(l.name, width);
        printf(" %6lld %6lld %-5s %-8s", (long long)l.k, (long long)l.n, bits,
               trellis_codebook_name(l.codebook));
      } else
        printf("%*s", width + 29, "");
      if (!planned(kd)) {
        printf(" %6s %s\n", "-", kd->why);
        continue;
      }
      trellis_buffer_sizes sz;
      if (query(kd, ms[j], &sz) != CLI_OK)
        return CLI_FAIL;
      printf(" %6lld %-8s", (long long)ms[j], trellis_path_name(sz.path));
      print_sizes(&sz);
      printf("\n");
    }
  }

  size_t other_bytes = 0;
  const size_t others = trellis_model_other_count(model);
  for (size_t i = 0; i < others; i++) {
    trellis_tensor t;
    if (trellis_model_other(model, i, &t) == TRELLIS_OK)
      other_bytes += t.nbytes;
  }
  trellis_clear_error();

  printf("\nweights: %zu EXL3 layer%s, %zu bytes (%.3f MB); %zu other "
         "tensor%s (embeddings, norms, an fp16 head), %zu bytes\n",
         count, count == 1 ? "" : "s", weight_bytes, (double)weight_bytes / 1e6,
         others, others == 1 ? "" : "s", other_bytes);
  size_t unplanned = 0;
  for (size_t i = 0; i < nkinds; i++)
    if (!planned(&kinds[i]))
      unplanned += kinds[i].layers;
  if (unplanned)
    printf("note: %zu layer%s run%s on the CPU only and %s not in the "
           "buffers below\n",
           unplanned, unplanned == 1 ? "" : "s", unplanned == 1 ? "s" : "",
           unplanned == 1 ? "is" : "are");
  printf("\nshared buffers of one stream (the largest over the layers, which "
         "run in sequence):\n");
  printf("%6s %12s %10s %10s %12s  %s\n", "m", "rotated", "input_f16",
         "output_f16", "workspace", "layers per path");
  for (int j = 0; j < nm; j++) {
    trellis_buffer_sizes max;
    if (max_sizes(path, kinds, nkinds, plans, nplans, ms[j], &max) != CLI_OK)
      return CLI_FAIL;
    size_t per_path[4] = {0, 0, 0, 0};
    for (size_t i = 0; i < nkinds; i++) {
      trellis_buffer_sizes sz;
      if (!planned(&kinds[i]))
        continue;
      if (query(&kinds[i], ms[j], &sz) != CLI_OK)
        return CLI_FAIL;
      if ((unsigned)sz.path < 4)
        per_path[sz.path] += kinds[i].layers;
    }
    printf("%6lld", (long long)ms[j]);
    print_sizes(&max);
    printf(" ");
    for (int p = 1, first = 1; p < 4; p++)
      if (per_path[p]) {
        printf("%s %s %zu", first ? "" : ",",
               trellis_path_name((trellis_path)p), per_path[p]);
        first = 0;
      }
    printf("\n");
  }
  /* Sizes need not grow with m (the path changes), so every m counts. */
  trellis_buffer_sizes all;
  memset(&all, 0, sizeof all);
  for (int64_t m = 1; m <= max_m; m++) {
    trellis_buffer_sizes max;
    if (max_sizes(path, kinds, nkinds, plans, nplans, m, &max) != CLI_OK)
      return CLI_FAIL;
    if (max.rotated_bytes > all.rotated_bytes)
      all.rotated_bytes = max.rotated_bytes;
    if (max.input_f16_bytes > all.input_f16_bytes)
      all.input_f16_bytes = max.input_f16_bytes;
    if (max.output_f16_bytes > all.output_f16_bytes)
      all.output_f16_bytes = max.output_f16_bytes;
    if (max.workspace_bytes > all.workspace_bytes)
      all.workspace_bytes = max.workspace_bytes;
  }
  const size_t buffers = all.rotated_bytes + all.input_f16_bytes +
                         all.output_f16_bytes + all.workspace_bytes;
  printf("\nprovision for every m in 1..%lld: rotated %zu, input_f16 %zu, "
         "output_f16 %zu, workspace %zu bytes\n",
         (long long)max_m, all.rotated_bytes, all.input_f16_bytes,
         all.output_f16_bytes, all.workspace_bytes);
  printf("one stream: EXL3 weights %zu + buffers %zu = %zu bytes (%.3f GB), "
         "besides x, y and the other tensors\n",
         weight_bytes, buffers, weight_bytes + buffers,
         (double)(weight_bytes + buffers) / 1e9);
  return CLI_OK;
}

int cli_info_plan(const char *path, const char *max_m_text,
                  const char *gpu_text) {
  long max_m = DEFAULT_MAX_M;
  if (max_m_text &&
      cli_parse_int("--max-m", max_m_text, 1, MOST_MAX_M, &max_m) != CLI_OK)
    return CLI_USAGE;
  cli_gpu_target target_storage;
  const cli_gpu_target *target = NULL;
  if (gpu_text) {
    if (cli_gpu_target_parse(gpu_text, &target_storage) != CLI_OK)
      return CLI_USAGE;
    target = &target_storage;
  }

  trellis_model *model = NULL;
  trellis_clear_error();
  trellis_status st = trellis_model_open(path, &model);
  if (st != TRELLIS_OK)
    return cli_lib_error(st, path);
  if (!target && (!trellis_cuda_built() || trellis_cuda_device_count() <= 0)) {
    cli_error("%s: --plan: plans are made from a weight in device memory "
              "and %s; --gpu NAME (e.g. --gpu h200) estimates them from the "
              "rules without one",
              path,
              trellis_cuda_built() ? CLI_NO_CUDA_DEVICE : CLI_NO_CUDA_BUILD);
    trellis_model_close(model);
    return CLI_FAIL;
  }

  const size_t count = trellis_model_layer_count(model);
  kind *kinds = calloc(count ? count : 1, sizeof *kinds);
  size_t *kind_of = calloc(count ? count : 1, sizeof *kind_of);
  const trellis_plan **plans = calloc(count ? count : 1, sizeof *plans);
  size_t nkinds = 0, nplans = 0;
  int r = CLI_OK;
  if (!kinds || !kind_of || !plans) {
    cli_error("%s: out of host memory", path);
    r = CLI_FAIL;
  }
  for (size_t i = 0; r == CLI_OK && i < count; i++) {
    trellis_layer_info l;
    if ((st = trellis_model_layer_info(model, i, &l)) != TRELLIS_OK) {
      r = cli_lib_error(st, path);
      break;
    }
    size_t j = 0;
    while (j < nkinds && !same_kind(&kinds[j].key, &l))
      j++;
    if (j == nkinds) {
      kinds[j].key = l;
      nkinds++;
      if ((r = make_kind(model, i, max_m, target, &kinds[j])) != CLI_OK)
        break;
      if (kinds[j].plan)
        plans[nplans++] = kinds[j].plan;
    }
    kinds[j].layers++;
    kind_of[i] = j;
  }
  if (r == CLI_OK)
    r = report(path, model, max_m, target, kinds, nkinds, kind_of, plans,
               target ? nkinds : nplans);
  for (size_t j = 0; kinds && j < nkinds; j++) {
    free(kinds[j].estimate);
    trellis_plan_destroy(kinds[j].plan); /* plans before their weights */
    trellis_device_weight_destroy(kinds[j].dw);
  }
  free(kinds);
  free(kind_of);
  free(plans);
  trellis_model_close(model);
  return r;
}
