/* See include/qrimage.h.  In C rather than Swift because libjpeg reports
 * errors by longjmp, which must not cross Swift frames. */
#include "qrimage.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <png.h>
#include <zbar.h>

static int fail(char *error, size_t cap, const char *format, ...) {
    if (error && cap) {
        va_list args;
        va_start(args, format);
        vsnprintf(error, cap, format, args);
        va_end(args);
    }
    return -1;
}

static int too_large(uint32_t width, uint32_t height) {
    return width == 0 || height == 0 || (uint64_t)width * height > QRIMAGE_MAX_PIXELS;
}

static int load_png(FILE *file, const char *path, uint8_t **pixels, uint32_t *width, uint32_t *height,
                    char *error, size_t cap) {
    png_image image;
    memset(&image, 0, sizeof image);
    image.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_stdio(&image, file))
        return fail(error, cap, "%s is not a PNG image libpng can read (%s)", path, image.message);
    if (too_large(image.width, image.height)) {
        png_image_free(&image);
        return fail(error, cap, "%s is %ux%u pixels; at most %u pixels are read", path, image.width,
                    image.height, QRIMAGE_MAX_PIXELS);
    }
    image.format = PNG_FORMAT_GRAY;
    uint8_t *buffer = malloc((size_t)image.width * image.height);
    if (!buffer) {
        png_image_free(&image);
        return fail(error, cap, "out of memory for a %ux%u image", image.width, image.height);
    }
    png_color white = {255, 255, 255};
    if (!png_image_finish_read(&image, &white, buffer, 0, NULL)) {
        free(buffer);
        png_image_free(&image);
        return fail(error, cap, "%s is a damaged PNG image (%s)", path, image.message);
    }
    *pixels = buffer;
    *width = image.width;
    *height = image.height;
    return 0;
}

struct jpeg_failure {
    struct jpeg_error_mgr manager;
    jmp_buf jump;
    char message[JMSG_LENGTH_MAX];
};

static void jpeg_failed(j_common_ptr info) {
    struct jpeg_failure *failure = (struct jpeg_failure *)info->err;
    failure->manager.format_message(info, failure->message);
    longjmp(failure->jump, 1);
}

static void jpeg_warning(j_common_ptr info, int level) {
    (void)info;
    (void)level; /* corrupt-data warnings: decode what can be decoded */
}

static int load_jpeg(FILE *file, const char *path, uint8_t **pixels, uint32_t *width, uint32_t *height,
                     char *error, size_t cap) {
    struct jpeg_decompress_struct info;
    struct jpeg_failure failure;
    uint8_t *volatile buffer = NULL;
    memset(&info, 0, sizeof info);
    info.err = jpeg_std_error(&failure.manager);
    failure.manager.error_exit = jpeg_failed;
    failure.manager.emit_message = jpeg_warning;
    failure.message[0] = 0;
    if (setjmp(failure.jump)) {
        jpeg_destroy_decompress(&info);
        free(buffer);
        return fail(error, cap, "%s is a damaged JPEG image (%s)", path, failure.message);
    }
    jpeg_create_decompress(&info);
    jpeg_stdio_src(&info, file);
    jpeg_read_header(&info, TRUE);
    if (too_large(info.image_width, info.image_height)) {
        uint32_t w = info.image_width, h = info.image_height;
        jpeg_destroy_decompress(&info);
        return fail(error, cap, "%s is %ux%u pixels; at most %u pixels are read", path, w, h, QRIMAGE_MAX_PIXELS);
    }
    info.out_color_space = JCS_GRAYSCALE;
    jpeg_start_decompress(&info);
    size_t row_bytes = (size_t)info.output_width * (size_t)info.output_components;
    if (info.output_components != 1) longjmp(failure.jump, 1);
    buffer = malloc(row_bytes * info.output_height);
    if (!buffer) {
        jpeg_destroy_decompress(&info);
        return fail(error, cap, "out of memory for a %ux%u image", info.output_width, info.output_height);
    }
    while (info.output_scanline < info.output_height) {
        JSAMPROW row = buffer + (size_t)info.output_scanline * row_bytes;
        jpeg_read_scanlines(&info, &row, 1);
    }
    *width = info.output_width;
    *height = info.output_height;
    jpeg_finish_decompress(&info);
    jpeg_destroy_decompress(&info);
    *pixels = buffer;
    return 0;
}

int qrimage_load_gray(const uint8_t *data, size_t length, const char *name, uint8_t **pixels, uint32_t *width,
                      uint32_t *height, char *error, size_t error_cap) {
    if ((!data && length) || !name || !pixels || !width || !height) return fail(error, error_cap, "a NULL argument");
    const char *path = name;
    /* fmemopen refuses an empty buffer: nothing is neither image. */
    if (length < 3) return fail(error, error_cap, "%s is neither a PNG nor a JPEG image", path);
    FILE *file = fmemopen((void *)data, length, "rb");
    if (!file) return fail(error, error_cap, "cannot read %s: %s", path, strerror(errno));
    unsigned char magic[8] = {0};
    size_t got = fread(magic, 1, sizeof magic, file);
    rewind(file);
    int rc;
    if (got == 8 && png_sig_cmp(magic, 0, 8) == 0)
        rc = load_png(file, path, pixels, width, height, error, error_cap);
    else if (got >= 3 && magic[0] == 0xFF && magic[1] == 0xD8 && magic[2] == 0xFF)
        rc = load_jpeg(file, path, pixels, width, height, error, error_cap);
    else
        rc = fail(error, error_cap, "%s is neither a PNG nor a JPEG image", path);
    fclose(file);
    return rc;
}

void qrimage_free(uint8_t *pixels) { free(pixels); }

int qrimage_write_png_gray(const char *path, const uint8_t *pixels, uint32_t width, uint32_t height,
                           char *error, size_t error_cap) {
    if (!path || !pixels) return fail(error, error_cap, "a NULL argument");
    if (too_large(width, height)) return fail(error, error_cap, "a %ux%u image is too large", width, height);
    png_image image;
    memset(&image, 0, sizeof image);
    image.version = PNG_IMAGE_VERSION;
    image.width = width;
    image.height = height;
    image.format = PNG_FORMAT_GRAY;
    if (!png_image_write_to_file(&image, path, 0, pixels, 0, NULL))
        return fail(error, error_cap, "cannot write %s (%s)", path, image.message);
    return 0;
}

int qrimage_scan(const uint8_t *pixels, uint32_t width, uint32_t height,
                 void (*found)(void *ctx, const char *data, size_t length), void *ctx,
                 int *count, char *error, size_t error_cap) {
    if (!pixels || !found || !count) return fail(error, error_cap, "a NULL argument");
    if (too_large(width, height)) return fail(error, error_cap, "a %ux%u image is too large", width, height);
    zbar_image_scanner_t *scanner = zbar_image_scanner_create();
    zbar_image_t *image = zbar_image_create();
    if (!scanner || !image) {
        if (image) zbar_image_destroy(image);
        if (scanner) zbar_image_scanner_destroy(scanner);
        return fail(error, error_cap, "zbar could not start");
    }
    zbar_image_scanner_set_config(scanner, ZBAR_NONE, ZBAR_CFG_ENABLE, 0);
    zbar_image_scanner_set_config(scanner, ZBAR_QRCODE, ZBAR_CFG_ENABLE, 1);
    zbar_image_set_format(image, zbar_fourcc('Y', '8', '0', '0'));
    zbar_image_set_size(image, width, height);
    /* zbar only reads the data; no cleanup handler: the caller owns it. */
    zbar_image_set_data(image, pixels, (unsigned long)width * height, NULL);
    int n = zbar_scan_image(scanner, image);
    if (n < 0) {
        zbar_image_destroy(image);
        zbar_image_scanner_destroy(scanner);
        return fail(error, error_cap, "zbar failed to scan the image");
    }
    int seen = 0;
    for (const zbar_symbol_t *symbol = zbar_image_first_symbol(image); symbol; symbol = zbar_symbol_next(symbol)) {
        if (zbar_symbol_get_type(symbol) != ZBAR_QRCODE) continue;
        found(ctx, zbar_symbol_get_data(symbol), zbar_symbol_get_data_length(symbol));
        seen++;
    }
    zbar_image_destroy(image);
    zbar_image_scanner_destroy(scanner);
    *count = seen;
    return 0;
}
