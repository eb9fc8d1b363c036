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
#include <jerror.h>
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

/* Corrupt-data warnings: decode what can be decoded, but a file cut short
 * is damaged (libjpeg would fill the rest with grey). */
static void jpeg_warning(j_common_ptr info, int level) {
    if (level < 0 && info->err->msg_code == JWRN_JPEG_EOF) jpeg_failed(info);
}

/* libjpeg's errors for a well-formed JPEG that it cannot decode (a
 * process, precision or feature it lacks) rather than a damaged one. */
static int jpeg_unsupported(int code) {
    switch (code) {
    case JERR_SOF_UNSUPPORTED:
    case JERR_BAD_PRECISION:
    case JERR_ARITH_NOTIMPL:
    case JERR_NOT_COMPILED:
    case JERR_NOTIMPL:
    case JERR_CONVERSION_NOTIMPL:
    case JERR_COMPONENT_COUNT:
        return 1;
    default:
        return 0;
    }
}

static const char *jpeg_space_name(J_COLOR_SPACE space) {
    switch (space) {
    case JCS_GRAYSCALE: return "grey";
    case JCS_RGB: return "RGB";
    case JCS_YCbCr: return "YCbCr";
    case JCS_CMYK: return "CMYK";
    case JCS_YCCK: return "YCCK";
    default: return "unknown";
    }
}

/* Grey of a row of CMYK pixels (libjpeg turns YCCK into CMYK): each ink
 * takes its share off the red, green or blue of white, black off all
 * three, then grey = 0.299 R + 0.587 G + 0.114 B, as libjpeg does from
 * RGB.  With an Adobe marker (APP14, as Photoshop, ImageMagick and Pillow
 * write CMYK and YCCK) the samples are inverted, 255 meaning no ink. */
static void cmyk_to_gray(const uint8_t *cmyk, uint8_t *gray, size_t width, int inverted) {
    for (size_t x = 0; x < width; x++, cmyk += 4) {
        unsigned c = cmyk[0], m = cmyk[1], y = cmyk[2], k = cmyk[3];
        if (!inverted) {
            c = 255 - c;
            m = 255 - m;
            y = 255 - y;
            k = 255 - k;
        }
        /* Now 255 is no ink: red = c * k / 255, and so on. */
        unsigned r = c * k, g = m * k, b = y * k; /* each at most 255 * 255 */
        gray[x] = (uint8_t)((r * 77 + g * 150 + b * 29 + 255 * 128) / (255 * 256));
    }
}

static int load_jpeg(FILE *file, const char *path, uint8_t **pixels, uint32_t *width, uint32_t *height,
                     char *error, size_t cap) {
    struct jpeg_decompress_struct info;
    struct jpeg_failure failure;
    uint8_t *volatile buffer = NULL;
    uint8_t *volatile row_cmyk = NULL;
    memset(&info, 0, sizeof info);
    info.err = jpeg_std_error(&failure.manager);
    failure.manager.error_exit = jpeg_failed;
    failure.manager.emit_message = jpeg_warning;
    failure.message[0] = 0;
    if (setjmp(failure.jump)) {
        int unsupported = jpeg_unsupported(failure.manager.msg_code);
        jpeg_destroy_decompress(&info);
        free(buffer);
        free(row_cmyk);
        if (unsupported) return fail(error, cap, "%s uses a JPEG feature that is not supported (%s)", path, failure.message);
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
    /* libjpeg tells the colour space from the component count and the
     * JFIF or Adobe marker (its transform: 0 RGB or CMYK, 1 YCbCr, 2 YCCK).
     * Grey, RGB and YCbCr it turns into grey itself; CMYK and YCCK it
     * gives as CMYK, turned into grey here. */
    int cmyk = 0;
    switch (info.jpeg_color_space) {
    case JCS_GRAYSCALE:
    case JCS_RGB:
    case JCS_YCbCr:
        info.out_color_space = JCS_GRAYSCALE;
        break;
    case JCS_CMYK:
    case JCS_YCCK:
        info.out_color_space = JCS_CMYK;
        cmyk = 1;
        break;
    default: {
        J_COLOR_SPACE space = info.jpeg_color_space;
        int components = info.num_components;
        jpeg_destroy_decompress(&info);
        return fail(error, cap,
                    "%s: JPEG colour space %s (%d components) is not supported; grey, RGB, YCbCr, CMYK "
                    "and YCCK are", path, jpeg_space_name(space), components);
    }
    }
    int inverted = info.saw_Adobe_marker;
    jpeg_start_decompress(&info);
    if (info.output_components != (cmyk ? 4 : 1)) {
        int components = info.output_components;
        J_COLOR_SPACE space = info.jpeg_color_space;
        jpeg_destroy_decompress(&info);
        return fail(error, cap, "%s: libjpeg gave %d components a pixel for JPEG colour space %s", path,
                    components, jpeg_space_name(space));
    }
    size_t row_bytes = (size_t)info.output_width;
    buffer = malloc(row_bytes * info.output_height);
    if (cmyk) row_cmyk = malloc(row_bytes * 4);
    if (!buffer || (cmyk && !row_cmyk)) {
        uint32_t w = info.output_width, h = info.output_height;
        jpeg_destroy_decompress(&info);
        free(buffer);
        free(row_cmyk);
        return fail(error, cap, "out of memory for a %ux%u image", w, h);
    }
    while (info.output_scanline < info.output_height) {
        uint8_t *gray = buffer + (size_t)info.output_scanline * row_bytes;
        JSAMPROW row = cmyk ? row_cmyk : gray;
        /* A source that reads from memory never suspends: one row a call. */
        jpeg_read_scanlines(&info, &row, 1);
        if (cmyk) cmyk_to_gray(row_cmyk, gray, row_bytes, inverted);
    }
    *width = info.output_width;
    *height = info.output_height;
    jpeg_finish_decompress(&info);
    jpeg_destroy_decompress(&info);
    free(row_cmyk);
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
