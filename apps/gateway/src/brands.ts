import type { FastifyInstance } from 'fastify';
import type { BrandSet } from '@operator/config';

declare module 'fastify' {
  interface FastifyRequest {
    /** The brands the request's credential opens (null: every brand); set by the CRM and internal key guards. */
    brands: BrandSet;
  }
}

/** Before any guard runs a request opens no brand, so a route behind none cannot act on one by mistake. */
export function decorateBrands(app: FastifyInstance) {
  app.decorateRequest('brands', {
    getter(this: { _brands?: BrandSet }) {
      return this._brands ?? [];
    },
    setter(this: { _brands?: BrandSet }, brands: BrandSet) {
      this._brands = brands;
    },
  });
}

/** The brand ids a read is kept to, for SQL's `= ANY($n)`; null: no filter. */
export const brandFilter = (brands: BrandSet): string[] | null => (brands === null ? null : [...brands]);
