import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { BrandSet } from '@operator/config';

declare module 'fastify' {
  interface FastifyRequest {
    /** The brands the request's credential opens (null: every brand); set by the CRM and internal key guards. */
    brands: BrandSet;
  }
}

const SET = Symbol('brands');
type Holder = FastifyRequest & { [SET]?: BrandSet };

/** Before any guard runs a request opens no brand, so a route behind none cannot act on one by mistake. */
export function decorateBrands(app: FastifyInstance) {
  app.decorateRequest('brands', {
    getter(this: FastifyRequest) {
      const brands = (this as Holder)[SET];
      return brands === undefined ? [] : brands;
    },
    setter(this: FastifyRequest, brands: BrandSet) {
      (this as Holder)[SET] = brands;
    },
  });
}

/** The brand ids a read is kept to, for SQL's `= ANY($n)`; null: no filter. */
export const brandFilter = (brands: BrandSet): string[] | null => (brands === null ? null : [...brands]);
